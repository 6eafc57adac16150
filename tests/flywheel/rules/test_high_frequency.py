"""High-frequency task data (Xiaomi-GUI-0 §3.1): functionally equivalent paths through different
entry points, on a graph built by hand and paths counted by hand."""
from flywheel.rules.high_frequency import EntryPath, equivalent_entry_paths, path_group_id, path_signature

# A notes app, pages by name, every step costs 1 (edge ids in brackets):
#   home -[1]-> note -[2]-> move            (open the note, "Move to folder")
#   home -[3]-> actions(dialog) -[4]-> move (long-press the row, "Move to folder")
#   home -[5]-> search -[6]-> note          (search, open the result: then [2] to move)
#   home -[7]-> settings -[8]-> home        (a page that only leads back: no way to move)
#   home -[9]-> note                        (a second button to the note: the same entry point as [1])
#   folders -[10]-> move                    (folders is not reachable from home)
#   note -[11]-> home, actions -[12]-> home (back to the start: a path never returns there)
LINKS = [(1, "home", "note", 1), (2, "note", "move", 1), (3, "home", "actions", 1), (4, "actions", "move", 1),
         (5, "home", "search", 1), (6, "search", "note", 1), (7, "home", "settings", 1), (8, "settings", "home", 1),
         (9, "home", "note", 1), (10, "folders", "move", 1), (11, "note", "home", 1), (12, "actions", "home", 1)]


def test_one_path_per_entry_point_cheapest_first():
    paths = equivalent_entry_paths(LINKS, starts=["home"], targets=["move"], limit=5)
    assert [p.edges for p in paths] == [(1, 2), (3, 4), (5, 6, 2)]
    assert [p.entry for p in paths] == [("home", "note"), ("home", "actions"), ("home", "search")]
    assert paths[2] == EntryPath(entry=("home", "search"), edges=(5, 6, 2), pages=("home", "search", "note", "move"),
                                 cost=3)
    # the limit keeps the cheapest; the settings page leads nowhere but home, so it gives no path
    assert [p.edges for p in equivalent_entry_paths(LINKS, ["home"], ["move"], limit=2)] == [(1, 2), (3, 4)]


def test_the_same_entry_point_through_another_button_is_not_another_path():
    # [1] and [9] both go home -> note: the lower id is the one route (hand-checked above: (1, 2))
    paths = equivalent_entry_paths(LINKS, ["home"], ["note"], limit=5)
    assert [p.edges for p in paths] == [(1,), (5, 6)]
    assert len({p.entry for p in paths}) == len(paths)


def test_a_dearer_step_reorders_the_paths():
    dear = [(i, s, t, 5 if i == 3 else c) for i, s, t, c in LINKS]  # the long press costs 5
    paths = equivalent_entry_paths(dear, ["home"], ["move"], limit=5)
    assert [(p.edges, p.cost) for p in paths] == [((1, 2), 2), ((5, 6, 2), 3), ((3, 4), 6)]


def test_an_untakeable_edge_is_left_out():
    never = [(i, s, t, None if i == 4 else c) for i, s, t, c in LINKS]  # e.g. a clipboard edge
    assert [p.edges for p in equivalent_entry_paths(never, ["home"], ["move"], limit=5)] == [(1, 2), (5, 6, 2)]


def test_equivalent_target_pages_and_several_starts():
    # the function is done on "move" or on "folders" (a reuse node's page); two pages a launch lands on
    paths = equivalent_entry_paths(LINKS + [(13, "widget", "folders", 1)], ["home", "widget"], ["move", "folders"],
                                   limit=10)
    assert [p.edges for p in paths] == [(13,), (1, 2), (3, 4), (5, 6, 2)]
    assert paths[0].entry == ("widget", "folders")


def test_a_start_on_the_functions_page_is_the_empty_path():
    [path] = equivalent_entry_paths(LINKS, ["move"], ["move"], limit=3)
    assert path.entry == ("move", None) and path.edges == () and path.cost == 0


def test_max_steps_cuts_long_detours_and_limits_below_one_give_nothing():
    assert [p.edges for p in equivalent_entry_paths(LINKS, ["home"], ["move"], limit=5, max_steps=2)] == [(1, 2), (3, 4)]
    assert equivalent_entry_paths(LINKS, ["home"], ["move"], limit=0) == []
    assert equivalent_entry_paths(LINKS, ["home"], ["nowhere"], limit=3) == []


def test_group_and_signature():
    assert path_group_id(42) == "hf-42"
    assert path_signature((5, 6, 2)) == "5-6-2" and path_signature(()) == "start"
