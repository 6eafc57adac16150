from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """People and their roles: the bottom layer every other package may use."""

    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from accounts import history

        history.connect()  # the decision history's actor stamp (accounts/history.py)
