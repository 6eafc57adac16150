"""Prerequisites as data (§2.2.6): which recipes meet them, what they ask of a phone."""
from flywheel.rules.prerequisites import MAX_SETUP_STEPS, Recipe, normalise, phone_requirements, resolve, step_problems

SIGNED_IN = Recipe("shop-signed-in", ("signed in to shopmart", "logged in to shopmart"), account="com.google",
                   apps=("com.sim.shop",), steps=({"action": "open", "app": "com.sim.shop"},))
CARD = Recipe("card-bound", ("a bank card bound",), apps=("com.example.wallet",))


def test_case_spacing_and_end_punctuation_do_not_matter():
    assert normalise("  Logged in   to ShopMart. ") == "logged in to shopmart"
    assert normalise("已绑定银行卡。") == "已绑定银行卡"
    assert normalise("") == normalise(None) == ""


def test_each_prerequisite_is_met_by_its_recipe_once_or_said_unmet():
    met, unmet = resolve(["Logged in to ShopMart", "signed in to ShopMart", "two unread messages from Dana",
                          "A bank card bound.", " "], [SIGNED_IN, CARD])
    assert met == [SIGNED_IN, CARD]                    # the query's order, each recipe once
    assert unmet == ["two unread messages from Dana"]  # said in the query's own words; blanks are no prerequisite
    assert resolve([], [SIGNED_IN]) == ([], [])


def test_what_the_recipes_ask_of_a_phone():
    assert phone_requirements([SIGNED_IN, CARD]) == {"accounts": ["com.google"],
                                                      "apps": ["com.example.wallet", "com.sim.shop"]}
    assert phone_requirements([]) == {}


def test_a_recipes_steps_are_a_few_known_path_actions():
    good = [{"action": "open", "app": "com.sim.shop"}, {"action": "click", "target": {"text": "Me"}},
            {"action": "system_button", "button": "home"}]
    assert step_problems(good) == []
    assert step_problems("open the app") == ["the steps are a list"]
    assert step_problems([{"action": "open"}, {"action": "click"}, {"action": "terminate"}]) == [
        "step 1: an open names its app", "step 2: a click names its target (text, resource_id or content_desc)",
        "step 3: an open, click, type, swipe, long_press, system_button or wait"]
    assert step_problems(good * MAX_SETUP_STEPS) == [f"at most {MAX_SETUP_STEPS} steps"]
