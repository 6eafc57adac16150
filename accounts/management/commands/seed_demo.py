"""Create the role groups and one demo user per role. Safe to run again."""
import secrets

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand

from accounts.roles import ADMIN, ROLES


class Command(BaseCommand):
    help = "Create the role groups and demo users (annotator, adjudicator, manager, admin)."

    def add_arguments(self, parser):
        parser.add_argument("--reset-passwords", action="store_true",
                            help="give the demo users new passwords and print them")

    def handle(self, *args, reset_passwords=False, **options):
        credentials_file = settings.VAR_DIR / "demo-credentials.txt"
        created = []
        for role in ROLES:
            group, _ = Group.objects.get_or_create(name=role)
            user, was_created = User.objects.get_or_create(username=role)
            if was_created or reset_passwords:
                password = secrets.token_urlsafe(9)
                user.set_password(password)
                user.is_staff = user.is_superuser = role == ADMIN
                user.save()
                created.append((role, password))
            user.groups.add(group)
        if created:
            lines = [f"{name} / {password}" for name, password in created]
            previous = {}
            if credentials_file.exists():
                for line in credentials_file.read_text().splitlines():
                    name, _, password = line.partition(" / ")
                    previous[name] = password
            previous.update(dict(created))
            credentials_file.write_text("".join(f"{n} / {p}\n" for n, p in previous.items()))
            credentials_file.chmod(0o600)
            self.stdout.write("Demo logins (shown once; also kept in var/demo-credentials.txt):")
            for line in lines:
                self.stdout.write(f"  {line}")
        else:
            self.stdout.write(f"Demo users exist; their logins are in {credentials_file} "
                              "(new ones: manage.py seed_demo --reset-passwords).")
