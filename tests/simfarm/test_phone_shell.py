"""The phone's shell: parsing, compound commands, redirections, files and the usual commands."""
import pytest
from adbutils._utils import list2cmdline

from simfarm.shell import ShellSyntaxError, parse, tokenize
from tests.simfarm.phone_fixtures import new_phone, sh


@pytest.fixture
def phone():
    return new_phone()


def test_quoting_and_operators_are_tokenized_like_sh():
    sequence = parse(tokenize("""echo 'a;b' "c && d" e\\ f; true && echo ok || echo no"""))
    first = [w.text for w in sequence[0][1][0].argv]
    assert first == ["echo", "a;b", "c && d", "e f"]
    assert [connector for connector, _ in sequence] == [";", ";", "&&", "||"]


def test_syntax_errors_are_reported_not_raised(phone):
    with pytest.raises(ShellSyntaxError):
        parse(tokenize("echo 'unterminated"))
    result = phone.run("echo 'unterminated")
    assert result.exit_code == 2 and b"unterminated" in result.stderr


def test_adbutils_dump_hierarchy_command_line(phone):
    result = phone.run("rm -f /data/local/tmp/uidump.xml; uiautomator dump /data/local/tmp/uidump.xml && echo success")
    assert result.exit_code == 0
    assert result.stdout == b"UI hierchary dumped to: /data/local/tmp/uidump.xml\nsuccess\n"
    assert phone.fs.read("/data/local/tmp/uidump.xml").startswith(b"<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy")


def test_exit_code_trailer_of_shell_v1_sees_the_previous_command(phone):
    assert phone.run("false; echo X4EXIT:$?").stdout == b"X4EXIT:1\n"
    assert phone.run("true; echo X4EXIT:$?").stdout == b"X4EXIT:0\n"
    assert phone.run("nosuchcmd; echo X4EXIT:$?").stdout == b"X4EXIT:127\n"


def test_unknown_command_is_127_with_sh_message(phone):
    result = phone.run("frobnicate --now")
    assert result.exit_code == 127
    assert result.stderr == b"/system/bin/sh: frobnicate: not found\n"


def test_and_or_short_circuit(phone):
    assert phone.run("false && echo no || echo yes").stdout == b"yes\n"
    assert phone.run("true || echo no; echo after").stdout == b"after\n"
    assert phone.run("exit 3; echo never").exit_code == 3
    assert phone.run("exit 3; echo never").stdout == b""


def test_echo_redirection_cat_and_append(phone):
    sh(phone, "echo hello > /sdcard/Download/a.txt && echo world >> /sdcard/Download/a.txt")
    assert sh(phone, "cat /sdcard/Download/a.txt") == "hello\nworld\n"
    assert "a.txt" in sh(phone, "ls /sdcard/Download")
    assert phone.run("test -f /sdcard/Download/a.txt").exit_code == 0
    assert phone.run("test -d /sdcard/Download/a.txt").exit_code == 1
    assert phone.run("[ -e /sdcard/nothing ]").exit_code == 1


def test_files_mkdir_touch_rm_and_globs(phone):
    sh(phone, "mkdir -p /sdcard/x/y && touch /sdcard/x/y/one.png /sdcard/x/y/two.png")
    listing = sh(phone, "ls -l /sdcard/x/y")
    assert "one.png" in listing and listing.startswith("total")
    sh(phone, "rm /sdcard/x/y/*.png")
    assert sh(phone, "ls /sdcard/x/y") == ""
    assert phone.run("rm /sdcard/x").exit_code == 1  # a directory needs -r
    sh(phone, "rm -rf /sdcard/x")
    assert phone.run("ls /sdcard/x").exit_code == 1
    assert phone.run("cat /sdcard/missing").stderr == b"cat: /sdcard/missing: No such file or directory\n"


def test_pipes_grep_and_wc(phone):
    assert sh(phone, "getprop | grep ro.product.model") == "[ro.product.model]: [Pixel 7]\n"
    assert sh(phone, "pm list packages | grep -c settings") == "1\n"
    assert phone.run("echo abc | grep -q zzz").exit_code == 1


def test_small_commands(phone):
    assert sh(phone, "whoami") == "shell\n"
    assert sh(phone, "id").startswith("uid=2000(shell)")
    assert sh(phone, "which input screencap") == "/system/bin/input\n/system/bin/screencap\n"
    assert sh(phone, "date +%Y-%m-%d") == "2026-03-16\n"
    before = phone.now()
    sh(phone, "sleep 30")
    assert phone.now() == before + 30
    assert sh(phone, "echo $EXTERNAL_STORAGE") == "/sdcard\n"


def test_getprop_wm_and_settings(phone):
    assert sh(phone, "getprop ro.serialno") == "sim-0001\n"
    assert sh(phone, "getprop ro.build.version.sdk") == "34\n"
    assert sh(phone, "getprop no.such.prop") == "\n"
    assert sh(phone, "wm size") == "Physical size: 1080x2400\n"
    assert sh(phone, "wm density") == "Physical density: 420\n"
    assert sh(phone, "settings get global wifi_on") == "1\n"
    sh(phone, "settings put system screen_brightness 42")
    assert sh(phone, "settings get system screen_brightness") == "42\n"
    assert sh(phone, "settings get secure no_such_key") == "null\n"
    assert "screen_brightness=42" in sh(phone, "settings list system")
    assert phone.run("settings get nowhere x").exit_code != 0


def test_adbutils_argument_lists_arrive_intact(phone):
    sh(phone, "monkey -p com.sim.translator -c android.intent.category.LAUNCHER 1")
    sh(phone, list2cmdline(["input", "tap", "540", "700"]))  # focus the text field
    sh(phone, list2cmdline(["input", "text", "it's a \"test\"; & more"]))
    assert phone.app_state("com.sim.translator")["input_text"] == "it's a \"test\"; & more"


def test_input_text_percent_s_is_a_space_and_unicode_works(phone):
    sh(phone, "monkey -p com.sim.translator 1")
    sh(phone, "input tap 540 700")
    sh(phone, "input text hello%sworld")
    sh(phone, "am broadcast -a ADB_INPUT_TEXT --es msg ' 你好'")
    assert phone.app_state("com.sim.translator")["input_text"] == "hello world 你好"


def test_bad_input_arguments_fail_clearly(phone):
    result = phone.run("input tap x")
    assert result.exit_code != 0 and b"Invalid arguments" in result.stderr
    assert phone.run("input keyevent KEYCODE_NOPE").exit_code != 0
    assert phone.run("input").exit_code == 1


def test_internal_errors_never_escape_run(phone, monkeypatch):
    def broken(*args):
        raise RuntimeError("boom")
    monkeypatch.setitem(phone.shell.commands, "wm", broken)
    result = phone.run("wm size")
    assert result.exit_code == 1 and b"internal error" in result.stderr and b"boom" in result.stderr


def test_raw_screencap_has_header_and_rgba(phone):
    raw = phone.run("screencap").stdout
    width, height, fmt = (int.from_bytes(raw[i:i + 4], "little") for i in (0, 4, 8))
    assert (width, height, fmt) == (1080, 2400, 1)
    assert len(raw) == 12 + 1080 * 2400 * 4
    sh(phone, "screencap -p /sdcard/s.png")
    assert phone.fs.read("/sdcard/s.png").startswith(b"\x89PNG")


def test_keycode_names_and_numbers():
    from simfarm.gestures import keycode_name
    assert keycode_name("4") == "BACK" and keycode_name("KEYCODE_4") == "4"
    assert keycode_name("KEYCODE_APP_SWITCH") == "APP_SWITCH" and keycode_name("home") == "HOME"
    assert keycode_name("KEYCODE_NOPE") is None and keycode_name("9999") is None
