"""What the explorer never touches, judged on the screen a touch would land on (rules.irreversible_hit)."""
from devices.uitree import node_at, parse_hierarchy
from flywheel.queries.exploration.rules import SOFT_WORDS, STRICT_WORDS, irreversible_hit, words_pattern

STRICT, SOFT = words_pattern(STRICT_WORDS), words_pattern(SOFT_WORDS)


def node(text, rid, cls, bounds, clickable=True, children=""):
    return (f'<node text="{text}" resource-id="{rid}" class="{cls}" package="com.android.settings" '
            f'content-desc="" clickable="{str(clickable).lower()}" enabled="true" bounds="{bounds}">{children}</node>')


def screen(*nodes):
    return ('<?xml version="1.0" encoding="UTF-8"?><hierarchy rotation="0">'
            + node("", "", "android.widget.FrameLayout", "[0,0][1080,2400]", clickable=False, children="".join(nodes))
            + "</hierarchy>")


RESET_DIALOG = screen(
    node("Reset Wi-Fi, mobile &amp; Bluetooth?", "android:id/alertTitle", "android.widget.TextView", "[80,900][1000,980]",
         clickable=False),
    node("Cancel", "android:id/button2", "android.widget.Button", "[500,1300][700,1400]"),
    node("Reset settings", "android:id/button1", "android.widget.Button", "[720,1300][1000,1400]"))
RESET_PAGE = screen(
    node("", "com.android.settings:id/reset_network", "android.widget.LinearLayout", "[0,400][1080,560]",
         children=node("Reset Wi-Fi, mobile &amp; Bluetooth", "android:id/title", "android.widget.TextView",
                       "[40,420][1000,540]", clickable=False)),
    node("Pay now", "com.android.settings:id/pay", "android.widget.TextView", "[0,600][1080,700]"))


def hit(xml, x, y):
    roots = parse_hierarchy(xml)
    return irreversible_hit(node_at(roots, x, y), roots, STRICT, SOFT)


def test_a_touch_landing_on_a_confirmations_positive_button_is_never_sent():
    # A row's point chosen on the page behind: the dialog that opened since is what the touch hits.
    assert hit(RESET_DIALOG, 850, 1350)
    assert not hit(RESET_DIALOG, 600, 1350)   # Cancel is fine
    assert not hit(RESET_DIALOG, 500, 200)    # nothing clickable there


def test_a_row_that_only_opens_a_confirmation_may_be_touched_but_money_never():
    assert not hit(RESET_PAGE, 500, 480)      # the row opens the dialog, which is recorded and backed out of
    assert hit(RESET_PAGE, 500, 650)
