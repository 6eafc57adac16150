"""Default rules of the safety audit (report §3.3.1). Admins edit or disable them in the admin;
this migration only adds rules whose name is not taken, so it never overwrites an edit."""
from django.db import migrations

# Empty action_types = every screen-touching action: a "swipe" that barely moves is a tap, and
# "Slide to pay" is paid with a swipe.
ANY_TOUCH = []

DEFAULT_RULES = [
    # -- money ---------------------------------------------------------------------------------
    dict(name="Payment confirmation", category="payment", action_types=ANY_TOUCH,
         element_patterns=[r"Pay now|Confirm (and )?pay(ment)?\b|Place order and pay|Pay \W?\d|"
                           r"Complete (purchase|payment)|Submit payment|Authori[sz]e payment|Slide to pay|"
                           r"确认支付|立即支付|确认付款|立即付款|去支付"],
         reason="Confirming a payment spends the user's money; stop and call the user"),
    dict(name="Send money", category="payment", action_types=ANY_TOUCH,
         element_patterns=[r"Send money|Transfer now|Confirm transfer|(Send|Transfer) \W?\d|Withdraw|"
                           r"转账|确认转账|汇款|提现"],
         reason="Sending or transferring money is irreversible; stop and call the user"),
    dict(name="Confirm on a transfer page", category="payment", action_types=ANY_TOUCH,
         element_patterns=[r"^\s*(Send|Confirm|Continue|Next|OK)\s*$|^(确认|下一步)$"],
         page_patterns=[r"transfer|send money|remittance|转账|汇款",
                        r"recipient|payee|to account|IBAN|account number|收款"],
         reason="This confirms a money transfer; stop and call the user"),
    dict(name="Typing a card number", category="payment", action_types=["type", "take_notes"],
         typed_text_patterns=["@card_number"],
         reason="Payment card numbers are never typed or noted by the agent"),
    # -- irreversible ----------------------------------------------------------------------------
    dict(name="Delete account", category="irreversible", action_types=ANY_TOUCH,
         element_patterns=[r"(Delete|Close|Deactivate|Remove|Cancel) (my |your |this )?account|"
                           r"Permanently delete|注销(账号|帐号|账户)|删除(账号|帐号|账户)"],
         reason="Deleting an account cannot be undone"),
    dict(name="Factory reset", category="irreversible", action_types=ANY_TOUCH,
         element_patterns=[r"Factory (data )?reset|Erase all data|Erase everything|Reset (phone|device|tablet)|"
                           r"Delete all data|恢复出厂|清除所有数据|抹掉所有"],
         reason="A factory reset erases the phone"),
    dict(name="Clear or delete all data", category="irreversible", action_types=ANY_TOUCH,
         element_patterns=[r"Clear (app )?(data|storage)|Clear all data|Delete all|Erase all|Wipe|"
                           r"Clear all (chats|messages|conversations|notes|history)|Delete everything|Empty trash|"
                           r"Clear (chat )?history|清除数据|全部删除|清空"],
         reason="Clearing or deleting all data cannot be undone"),
    dict(name="Uninstall an app", category="irreversible", action_types=ANY_TOUCH,
         element_patterns=[r"^\s*Uninstall\s*$|卸载"],
         reason="Uninstalling an app changes the phone's environment; stop and call the user"),
    # -- private data ----------------------------------------------------------------------------
    dict(name="Share private data", category="privacy", action_types=ANY_TOUCH,
         element_patterns=[r"Share (my |your )?(contacts?|location|live location|ID|identity|passwords?)|"
                           r"Export (contacts|passwords)|Send (my )?location|(Show|Reveal|View) passwords?|"
                           r"分享位置|导出通讯录|共享位置"],
         reason="This exposes private data (contacts, location, identity or passwords)"),
    dict(name="Typing into a password field", category="privacy", action_types=["type"],
         element_patterns=[r"\[password field\]|\bpass(word|code)\b|\bPIN\b|密码"],
         reason="Credentials are the user's: hand over with call_user instead of typing them"),
    dict(name="Typing or noting an ID number", category="privacy", action_types=["type", "take_notes"],
         typed_text_patterns=["@id_number"],
         reason="ID numbers are private data"),
    dict(name="Writing out a credential", category="privacy", action_types=["type", "take_notes"],
         typed_text_patterns=["@credential", "@otp"],
         reason="Passwords, secrets and one-time codes are never typed in the clear or noted"),
    # -- sensitive permissions -------------------------------------------------------------------
    dict(name="Device admin or unknown sources", category="permission", action_types=ANY_TOUCH,
         element_patterns=[r"Activate (this )?device admin|Allow from this source|Install unknown apps|"
                           r"激活设备管理"],
         reason="Granting device administration or installing from unknown sources is not the agent's call"),
]


def seed(apps, schema_editor):
    SafetyRule = apps.get_model("devices", "SafetyRule")
    for rule in DEFAULT_RULES:
        values = {key: value for key, value in rule.items() if key != "name"}
        values.setdefault("action_types", [])
        SafetyRule.objects.get_or_create(name=rule["name"], defaults=values)


def unseed(apps, schema_editor):
    SafetyRule = apps.get_model("devices", "SafetyRule")
    SafetyRule.objects.filter(name__in=[rule["name"] for rule in DEFAULT_RULES]).delete()


class Migration(migrations.Migration):
    dependencies = [("devices", "0002_work_items_and_safety")]
    operations = [migrations.RunPython(seed, unseed)]
