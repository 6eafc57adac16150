"""A dump that shows nothing of the app's page is blind: one opaque web view or canvas, or controls
with neither words nor ids; the status bar drawn by the system does not make it readable."""
from flywheel.screens.blindness import hierarchy_is_blind, readability

STATUS_BAR = ('<node class="android.widget.TextView" package="com.android.systemui" text="09:00" '
              'content-desc="" resource-id="" bounds="[0,0][200,60]" />')


def dump(*app_nodes: str) -> str:
    inner = "".join(app_nodes)
    return (f'<?xml version="1.0"?><hierarchy rotation="0">{STATUS_BAR}'
            f'<node class="android.widget.FrameLayout" package="com.sim.shop" text="" content-desc="" '
            f'resource-id="" bounds="[0,60][1080,2400]">{inner}</node></hierarchy>')


def test_an_ordinary_page_is_readable():
    xml = dump('<node class="android.widget.TextView" package="com.sim.shop" text="Headphones" '
               'content-desc="" resource-id="com.sim.shop:id/title" bounds="[0,100][1080,200]" />')
    assert not hierarchy_is_blind(xml)
    assert readability(xml).readable_nodes == 1


def test_one_opaque_web_view_over_the_page_is_blind():
    xml = dump('<node class="android.webkit.WebView" package="com.sim.shop" text="" content-desc="" '
               'resource-id="" bounds="[0,160][1080,2400]" />',
               '<node class="android.widget.TextView" package="com.sim.shop" text="Help" '
               'content-desc="" resource-id="" bounds="[0,60][1080,160]" />')
    assert hierarchy_is_blind(xml)
    assert readability(xml).opaque_regions == ((0, 160, 1080, 2400),)


def test_a_small_web_view_inside_a_readable_page_does_not_blind_it():
    xml = dump('<node class="android.webkit.WebView" package="com.sim.shop" text="" content-desc="" '
               'resource-id="" bounds="[0,1800][1080,2000]" />',
               '<node class="android.widget.TextView" package="com.sim.shop" text="Order #1002" '
               'content-desc="" resource-id="" bounds="[0,200][1080,300]" />')
    assert not hierarchy_is_blind(xml)


def test_a_canvas_app_of_controls_without_words_or_ids_is_blind():
    xml = dump('<node class="android.view.View" package="com.sim.shop" text="" content-desc="" '
               'resource-id="" clickable="true" bounds="[100,500][500,600]" />',
               '<node class="android.view.View" package="com.sim.shop" text="" content-desc="" '
               'resource-id="" clickable="true" bounds="[100,700][500,800]" />')
    assert hierarchy_is_blind(xml)


def test_an_empty_or_broken_dump_is_blind():
    assert hierarchy_is_blind("")
    assert hierarchy_is_blind("<hierarchy")
