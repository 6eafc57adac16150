"""The web host needs no torch: with torch and transformers unimportable the console starts, and
the training pages say how to install the training extras where the trainer runs."""
import os
import subprocess
import sys
import textwrap

from tests.conftest import ROOT

SCRIPT = textwrap.dedent("""
    import sys

    class NoTrainingExtras:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch", "transformers", "datasets", "accelerate"):
                raise ImportError(f"{name} is not installed on this host")
            return None

    sys.meta_path.insert(0, NoTrainingExtras())
    import django
    django.setup()
    from django.core.management import call_command
    call_command("migrate", verbosity=0)
    import config.asgi, config.celery, config.urls  # the web app and the workers start
    from django.contrib.auth.models import Group, User
    from django.test import Client
    manager = User.objects.create_user("pm", password="x")
    manager.groups.add(Group.objects.get_or_create(name="manager")[0])
    from flywheel.models import ModelVersion
    ModelVersion.objects.create(name="m0")  # so the launch form, and its button, are there
    client = Client()
    client.force_login(manager)
    page = client.get("/training/")
    assert page.status_code == 200, page.status_code
    text = page.content.decode()
    assert "make install-training" in text and 'data-testid="training-launch" disabled' in text, text[:500]
    demo = client.get("/flywheel-demo/").content.decode()
    assert 'data-testid="install-hint"' in demo and "make install-training" in demo, demo[:500]
    assert 'data-testid="demo-start" disabled' in demo, demo[:500]
    assert client.get("/", follow=True).status_code == 200
    print("started without torch")
""")


def test_the_console_starts_and_says_how_to_install_the_extras(tmp_path, own_processes):
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="config.settings",
               DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", FLYWHEEL_VAR_DIR=str(tmp_path / "var"),
               TRAINING_ROOT=str(tmp_path / "training"))
    result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "started without torch" in result.stdout
