"""Small hand-written screens and trajectories for the attribution rules' tests."""
from xml.sax.saxutils import quoteattr

from flywheel.rules.attribution_trace import StepFacts, TaskSpec, Trace, VoteFacts
from flywheel.rules.stops import Stop

SHOP = "com.sim.shop"


def node(text="", rid="", desc="", bounds=(0, 0, 0, 0), clickable=False, package=SHOP,
         cls="android.widget.TextView", children=()):
    x1, y1, x2, y2 = bounds
    inner = "".join(children)
    return (f"<node text={quoteattr(text)} resource-id={quoteattr(rid)} class={quoteattr(cls)} "
            f"package={quoteattr(package)} content-desc={quoteattr(desc)} clickable=\"{str(clickable).lower()}\" "
            f"bounds=\"[{x1},{y1}][{x2},{y2}]\">{inner}</node>")


def window(*children, package=SHOP):
    return node(package=package, cls="android.widget.FrameLayout", bounds=(0, 0, 1080, 2400), children=children)


def screen(*windows):
    return "<?xml version='1.0' ?><hierarchy rotation=\"0\">" + "".join(windows) + "</hierarchy>"


def button(text, y, rid="", desc="", package=SHOP, x=(48, 1032)):
    return node(text=text, rid=rid, desc=desc, bounds=(x[0], y, x[1], y + 120), clickable=True, package=package,
                cls="android.widget.Button")


# The ShopMart pages of the XM5-style tasks.
HOME = screen(window(node("ShopMart", bounds=(48, 100, 900, 260)), button("Headphones", 600, rid=f"{SHOP}:id/cat_headphones"),
                     button("Phones", 760, rid=f"{SHOP}:id/cat_phones")))
RESULTS = screen(window(node("Headphones", bounds=(48, 100, 900, 260)),
                        button("", 120, desc="Filter", x=(936, 1056)),
                        button("Sony WH-1000XM5 Headphones", 600), button("Bose QC45", 760)))
FILTERS = screen(window(node("Filters", bounds=(48, 100, 900, 260)), button("Sony", 600, rid=f"{SHOP}:id/brand_sony"),
                        button("Bose", 760, rid=f"{SHOP}:id/brand_bose"),
                        button("4.5 & up", 920, rid=f"{SHOP}:id/rating_45"),
                        button("Show results", 2000, rid=f"{SHOP}:id/apply_filters")))
PHONES = screen(window(node("Phones", bounds=(48, 100, 900, 260)), button("Pixel 8", 600)))
PRODUCT = screen(window(node("Sony WH-1000XM5 Headphones", bounds=(48, 100, 900, 260)), node("$349", bounds=(48, 300, 400, 380)),
                        button("Add to cart", 2000, rid=f"{SHOP}:id/add_to_cart")))
CART_NO_PAYMENT = screen(window(node("Cart", bounds=(48, 100, 900, 260)), node("No payment method", bounds=(48, 400, 900, 480)),
                                button("Add payment method", 600)))
NETWORK_ERROR = screen(window(node("Network unavailable, please retry", rid=f"{SHOP}:id/error_text", bounds=(48, 1047, 1032, 1147)),
                              button("Retry", 1300, rid=f"{SHOP}:id/btn_retry")))
AD = screen(window(node(desc="Advertisement", rid=f"{SHOP}:id/ad_image", bounds=(60, 300, 1020, 1800)),
                   node("Ad", rid=f"{SHOP}:id/ad_label", bounds=(80, 180, 300, 260)),
                   button("Learn more", 1600, rid=f"{SHOP}:id/ad_cta"),
                   button("", 200, rid=f"{SHOP}:id/ad_close", desc="Close", x=(900, 1020))))
PERMISSION = screen(window(node("Allow ShopMart to access this device's location?", rid="com.android.permissioncontroller:id/permission_message",
                                bounds=(80, 900, 1000, 1000), package="com.android.permissioncontroller"),
                           button("While using the app", 1100, rid="com.android.permissioncontroller:id/permission_allow_foreground_only_button",
                                  package="com.android.permissioncontroller"),
                           button("Don't allow", 1400, rid="com.android.permissioncontroller:id/permission_deny_button",
                                  package="com.android.permissioncontroller"),
                           package="com.android.permissioncontroller"))
CRASH = screen(window(node("ShopMart keeps stopping", bounds=(80, 900, 1000, 1000), package="android"),
                      button("Close app", 1100, rid="android:id/aerr_close", package="android"), package="android"))

SONY_RESULTS = screen(window(node("Headphones", bounds=(48, 100, 900, 260)), node("Brand: Sony", bounds=(48, 280, 600, 340)),
                             button("Sony WH-1000XM5 Headphones", 600)))

MILESTONES = [{"name": "filters open", "text": "Filters"}, {"name": "Sony results", "text": "Brand: Sony"}]
FILTER_PATH = {"mode": "tap", "steps": [
    {"action": "open", "app": SHOP}, {"action": "click", "target": {"text": "Headphones"}},
    {"action": "click", "target": {"content_desc": "Filter"}},
    {"action": "click", "target": {"resource_id": f"{SHOP}:id/brand_sony"}},
    {"action": "click", "target": {"resource_id": f"{SHOP}:id/apply_filters"}},
    {"action": "terminate", "status": "success"}]}
SPEC = TaskSpec(text="Open ShopMart, tap Headphones, open the filters, choose Sony and show the results.", tier="L1",
                verification={"terminal": [{"check": "content", "uri": "content://com.sim.shop/search",
                                            "contains": "brand=Sony"}], "milestones": MILESTONES},
                known_path=FILTER_PATH, capabilities=("multi_constraint_filtering",))


def tap(label, y, x=540):
    return {"action": "click", "point": [x, y], "coords": "pixel"}, {"Decision": f"Tap \"{label}\" at ({x}, {y})"}


def step(index, xml, action=None, cot=None, page=None, anomaly=None, gem=None, package=SHOP, answer="",
         milestones=MILESTONES):
    held = tuple(i for i, m in enumerate(milestones) if f'text={quoteattr(m["text"])}' in xml)
    return StepFacts(index=index, hierarchy=xml, action=action, cot=cot or {}, package=package, anomaly=anomaly,
                     page=page if page is not None else str(hash(xml)), milestones=held, gem_distance=gem,
                     answer=answer)


def trajectory(*pairs, spec=SPEC, stop: Stop | None = None, votes=(), adjudication="", safety="", anomalies=None,
               gems=None):
    """Steps from (screen, (action, cot)) pairs; a screen alone is a step without an action."""
    steps = []
    for index, pair in enumerate(pairs):
        xml, acted = (pair, (None, None)) if isinstance(pair, str) else pair
        steps.append(step(index, xml, acted[0], acted[1], anomaly=(anomalies or {}).get(index),
                          gem=(gems or {}).get(index), milestones=spec.milestones))
    return Trace(steps=tuple(steps), spec=spec, stop_kind=stop.kind if stop else "",
                 stop_reason=stop.detail if stop else "", votes=tuple(votes), adjudication=adjudication, safety=safety)


def votes(a, b, c, a_details=None):
    return (VoteFacts("A", a, "A says " + a, a_details or {}), VoteFacts("B", b, "B says " + b),
            VoteFacts("C", c, "C says " + c))


OPEN = ({"action": "open", "app": SHOP}, {"Decision": "Open the app for \"ShopMart\""})
SUCCESS = ({"action": "terminate", "status": "success"}, {"Decision": "Finish: the task is complete"})
FAILURE = ({"action": "terminate", "status": "failure"}, {"Decision": "Finish: the task is failed; stop"})
BACK = ({"action": "system_button", "button": "back"}, {"Decision": "Press the back button"})
