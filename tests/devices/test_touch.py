"""Gestures are real strokes: eased, jittered, seeded, with a duration — never a teleport."""
import random

from devices import touch


def test_a_swipe_is_an_eased_stroke_from_start_to_end():
    points = touch.plan_swipe((540, 1800), (540, 600), 450, random.Random(1), 1080, 2400)
    assert points[0].kind == "DOWN" and points[-1].kind == "UP"
    assert all(p.kind == "MOVE" for p in points[1:-1]) and len(points) >= 6
    assert (points[0].x, points[0].y) == (540, 1800) and (points[-1].x, points[-1].y) == (540, 600)
    assert touch.duration_of(points) == 450
    times = [p.t_ms for p in points]
    assert times == sorted(times)
    # ease-in-out: the first and last moves cover less distance per ms than the middle ones
    speeds = [abs(b.y - a.y) / max(1, b.t_ms - a.t_ms) for a, b in zip(points[1:-2], points[2:-1])]
    middle = max(speeds)
    assert speeds[0] < middle and speeds[-1] < middle


def test_strokes_are_jittered_but_reproducible_from_the_seed():
    a = touch.plan_swipe((100, 1200), (900, 1200), 500, random.Random(7), 1080, 2400)
    b = touch.plan_swipe((100, 1200), (900, 1200), 500, random.Random(7), 1080, 2400)
    c = touch.plan_swipe((100, 1200), (900, 1200), 500, random.Random(8), 1080, 2400)
    assert a == b and a != c
    assert any(p.y != 1200 for p in a[1:-2])          # not a ruler-straight line
    assert all(abs(p.y - 1200) < 60 for p in a)        # but close to it


def test_a_drag_picks_up_first_and_settles_before_release():
    points = touch.plan_drag((200, 500), (800, 500), 600, random.Random(0), 1080, 2400)
    assert points[1].t_ms > touch.DRAG_PICKUP_MS
    assert points[-1].t_ms - points[-2].t_ms == touch.DRAG_SETTLE_MS


def test_long_press_holds_in_place():
    points = touch.plan_long_press((300, 400), 800, random.Random(0), 1080, 2400)
    assert [p.kind for p in points] == ["DOWN", "MOVE", "UP"]
    assert touch.duration_of(points) == 800
    assert all(abs(p.x - 300) <= 2 and abs(p.y - 400) <= 2 for p in points)


def test_a_stroke_is_one_shell_line_of_motion_events_and_sleeps():
    points = touch.plan_swipe((540, 1800), (540, 600), 450, random.Random(1), 1080, 2400)
    line = touch.stroke_command(points)
    assert line.startswith("input motionevent DOWN 540 1800; sleep 0.")
    assert line.endswith("input motionevent UP 540 600")
    slept = sum(float(part.split()[1]) for part in line.split("; ") if part.startswith("sleep"))
    assert abs(slept - 0.45) < 0.05


def test_points_stay_on_screen():
    points = touch.plan_swipe((0, 0), (1079, 2399), 300, random.Random(3), 1080, 2400)
    assert all(0 <= p.x < 1080 and 0 <= p.y < 2400 for p in points)
