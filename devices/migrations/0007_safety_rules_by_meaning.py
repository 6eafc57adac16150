"""Safety rules that judge by meaning (report §3.3.1): each names an act of the meaning judge
(devices/act_meaning.py) instead of English words, so a purchase, transfer, irreversible deletion
or factory reset is blocked however it is worded, in whichever language, or drawn as an icon.
Like 0003, this only adds rules whose name is not taken, so it never overwrites an admin's edit."""
from django.db import migrations

TOUCHES = ["click", "double_click", "long_press", "swipe", "drag"]

MEANING_RULES = [
    dict(name="Purchase or payment (by meaning)", category="payment", action_types=TOUCHES,
         element_patterns=["@act:purchase"],
         reason="This buys, orders, subscribes or pays: it spends the user's money; stop and call the user"),
    dict(name="Money transfer (by meaning)", category="payment", action_types=TOUCHES,
         element_patterns=["@act:transfer"],
         reason="This sends or withdraws money, which cannot be taken back; stop and call the user"),
    dict(name="Irreversible deletion (by meaning)", category="irreversible", action_types=TOUCHES,
         element_patterns=["@act:delete"],
         reason="This deletes for good (an account, all data, the trash or something marked permanent)"),
    dict(name="Factory reset (by meaning)", category="irreversible", action_types=TOUCHES,
         element_patterns=["@act:reset"],
         reason="A factory reset erases the phone"),
]


def seed(apps, schema_editor):
    SafetyRule = apps.get_model("devices", "SafetyRule")
    for rule in MEANING_RULES:
        values = {key: value for key, value in rule.items() if key != "name"}
        SafetyRule.objects.get_or_create(name=rule["name"], defaults=values)


def unseed(apps, schema_editor):
    SafetyRule = apps.get_model("devices", "SafetyRule")
    SafetyRule.objects.filter(name__in=[rule["name"] for rule in MEANING_RULES]).delete()


class Migration(migrations.Migration):
    dependencies = [("devices", "0006_phone_hosts")]
    operations = [migrations.RunPython(seed, unseed)]
