"""Android commands of the virtual phone: input, screencap, uiautomator, wm, getprop, settings, svc."""
from simfarm import gestures, system_facts
from simfarm.shell import Result
from simfarm.shell_commands import fail, ok

INPUT_SOURCES = {"touchscreen", "touchpad", "keyboard", "mouse", "dpad", "gamepad", "stylus", "trackball",
                 "joystick", "touchnavigation", "rotaryencoder"}
INPUT_USAGE = ("Usage: input [<source>] [-d DISPLAY_ID] <command> [<arg>...]\n\nThe commands and default sources are:\n"
               "      text <string> (Default: keyboard)\n      keyevent [--longpress|--doubletap] <key code number or name> ...\n"
               "      tap <x> <y> (Default: touchscreen)\n      swipe <x1> <y1> <x2> <y2> [duration(ms)]\n"
               "      draganddrop <x1> <y1> <x2> <y2> [duration(ms)]\n      press (Default: trackball)\n"
               "      roll <dx> <dy> (Default: trackball)\n      motionevent <DOWN|UP|MOVE|CANCEL> <x> <y>\n")


def _numbers(values, count):
    if len(values) < count:
        raise ValueError("not enough arguments")
    return [int(float(v)) for v in values[:count]]


def cmd_input(sh, args, stdin):
    phone = sh.phone
    args = list(args)
    while args and (args[0] in INPUT_SOURCES or args[0] == "-d"):
        args = args[2:] if args[0] == "-d" else args[1:]
    if not args:
        return Result(INPUT_USAGE.encode(), b"", 1)
    command, rest = args[0], args[1:]
    engine = phone.engine
    if not phone.screen_on and command not in ("keyevent", "keycombination"):
        return ok()  # touches on a sleeping screen do nothing
    try:
        if command == "text":
            if not rest:
                return fail("Error: Invalid arguments for command: text\n" + INPUT_USAGE)
            engine.type_text(" ".join(rest).replace("%s", " "))
        elif command == "tap":
            x, y = _numbers(rest, 2)
            now = phone.now()
            engine.record_motion([("DOWN", x, y, now), ("UP", x, y, now)], engine.tap(x, y))
        elif command in ("swipe", "draganddrop"):
            x1, y1, x2, y2 = _numbers(rest, 4)
            duration = int(float(rest[4])) if len(rest) > 4 else 300
            now = phone.now()
            kind = engine.swipe(x1, y1, x2, y2, duration)
            engine.record_motion([("DOWN", x1, y1, now), ("UP", x2, y2, now + duration / 1000)], kind)
            phone.tick(max(1.0, duration / 1000))  # the command returns when the finger lifts
            return ok()
        elif command in ("keyevent", "keycombination"):
            keys = [k for k in rest if not k.startswith("--")]  # --longpress/--doubletap: one press here
            if not keys:
                return fail("Error: Invalid arguments for command: keyevent\n" + INPUT_USAGE)
            for key in keys:
                if not engine.key(key):
                    return fail(f"Error: Unknown keycode: {key}")
        elif command == "motionevent":
            action = rest[0].upper() if rest else ""
            x, y = _numbers(rest[1:], 2)
            return _motion(phone, action, x, y)
        elif command in ("press", "roll"):
            pass
        else:
            return fail(f"Error: Unknown command: {command}\n" + INPUT_USAGE)
    except (ValueError, IndexError):
        return fail(f"Error: Invalid arguments for command: {command}\n" + INPUT_USAGE)
    phone.tick()
    return ok()


def _motion(phone, action, x, y):
    """One motion event. Inside a gesture only `sleep` moves the clock, so the time between DOWN and
    UP is what the caller waited; the finished gesture (UP/CANCEL) costs one second like other input."""
    if not phone.engine.motion_event(action, x, y):
        return fail(f"Error: Unknown motion event: {action}")
    if action in ("UP", "CANCEL"):
        phone.tick()
    return ok()


def cmd_screencap(sh, args, stdin):
    phone = sh.phone
    png = "-p" in args
    paths = [a for a in args if not a.startswith("-") and a != (args[args.index("-d") + 1] if "-d" in args else None)]
    if paths and paths[0].endswith(".png"):
        png = True
    data = phone.screencap_png() if png else phone.screencap_raw()
    if paths:
        try:
            phone.fs.write(paths[0], data)
        except (ValueError, IsADirectoryError, NotADirectoryError):
            return fail(f"Error opening file: {paths[0]} (No such file or directory)")
        return ok()
    return Result(data)


def cmd_uiautomator(sh, args, stdin):
    phone = sh.phone
    if not args or args[0] != "dump":
        return Result(b"Usage: uiautomator <subcommand> [options]\n\nAvailable subcommands:\n\n"
                      b"help: displays help message\n\nruntest: executes UI automation tests\n\n"
                      b"dump: creates an XML dump of current UI hierarchy\n\nevents: prints out accessibility events "
                      b"until terminated\n", b"", 0 if args and args[0] == "help" else 1)
    paths = [a for a in args[1:] if not a.startswith("--")]
    path = paths[0] if paths else "/sdcard/window_dump.xml"
    xml = phone.dump_hierarchy().encode()
    if path == "/dev/tty":
        return ok(xml.decode() + "UI hierchary dumped to: /dev/tty\n")
    try:
        phone.fs.write(path, xml)
    except (ValueError, IsADirectoryError, NotADirectoryError):
        return Result(b"", f"ERROR: could not write to {path}\n".encode(), 1)
    return ok(f"UI hierchary dumped to: {path}\n")


def cmd_service(sh, args, stdin):
    """`service list|check|call`: only SurfaceFlinger's page-flip counter (transaction 1013) is
    implemented, the cheap "has the screen changed?" signal real devices give too."""
    if args[:1] == ["list"]:
        return ok("Found 1 services:\n0\tSurfaceFlinger: [android.ui.ISurfaceComposer]\n")
    if args[:1] == ["check"] and len(args) == 2:
        found = args[1] == "SurfaceFlinger"
        return ok(f"Service {args[1]}: {'found' if found else 'not found'}\n")
    if args[:3] == ["call", "SurfaceFlinger", "1013"]:
        count = sh.phone.page_flip_count() & 0xFFFFFFFF
        return ok(f"Result: Parcel({count:08x}    '....')\n")
    if args[:1] == ["call"] and len(args) >= 3:
        return ok("Result: Parcel(ffffffb6    '....')\n")  # -74: this transaction is unknown here
    return fail("usage: service [-h|-?]\n       service list\n       service check SERVICE\n"
                "       service call SERVICE CODE [i32 N | i64 N | f N | d N | s16 STR ] ...")


def cmd_wm(sh, args, stdin):
    phone = sh.phone
    if not args or args[0] == "size":
        if len(args) > 1:
            if args[1] == "reset":
                phone.set_display_size(None)
                return ok()
            try:
                width, height = (int(v) for v in args[1].lower().split("x"))
            except ValueError:
                return fail(f"Error: bad size {args[1]}", 255)
            phone.set_display_size((width, height))  # apps are laid out and captured at the new size
            return ok()
        text = f"Physical size: {phone.width}x{phone.height}\n"
        if phone.size_override:
            text += "Override size: {}x{}\n".format(*phone.size_override)
        return ok(text)
    if args[0] == "density":
        if len(args) > 1:
            phone.density_override = None if args[1] == "reset" else args[1]
            return ok()
        text = f"Physical density: {phone.density}\n"
        if phone.density_override:
            text += f"Override density: {phone.density_override}\n"
        return ok(text)
    if args[0] == "user-rotation":
        return ok("lock 0\n")
    return fail(f"Error: unknown command '{args[0]}'", 255)


def cmd_getprop(sh, args, stdin):
    props = sh.phone.props()
    if not args:
        return ok("".join(f"[{k}]: [{v}]\n" for k, v in sorted(props.items())))
    return ok(props.get(args[0], args[1] if len(args) > 1 else "") + "\n")


def cmd_setprop(sh, args, stdin):
    if len(args) != 2:
        return fail("setprop: need 2 arguments")
    if args[0].startswith("ro."):
        return fail(f"Failed to set property '{args[0]}' to '{args[1]}'.\nSee dmesg for error reason.")
    if args[0] == "persist.sys.locale":
        sh.phone.set_fact("locale", args[1])
    elif not system_facts.set_prop(sh.phone, args[0], args[1]):
        sh.phone.extra_props[args[0]] = args[1]
    return ok()


def cmd_settings(sh, args, stdin):
    phone = sh.phone
    usage = "usage:  settings [--user <USER_ID> | current] get namespace key\n"
    args = list(args)
    if args[:1] == ["--user"]:
        args = args[2:]
    if len(args) < 2:
        return fail(usage, 255)
    verb, namespace = args[0], args[1]
    if namespace not in ("system", "secure", "global"):
        return fail(f"Invalid namespace '{namespace}'\n" + usage, 255)
    if verb == "get" and len(args) >= 3:
        value = phone.settings.get(namespace, args[2])
        return ok(("null" if value is None else value) + "\n")
    if verb == "put" and len(args) >= 4:
        phone.put_setting(namespace, args[2], args[3])
        return ok()
    if verb == "delete" and len(args) >= 3:
        deleted = phone.settings.delete(namespace, args[2])
        return ok(f"Deleted {int(deleted)} rows\n")
    if verb == "list":
        return ok("".join(f"{k}={v}\n" for k, v in sorted(phone.settings.items(namespace))))
    if verb == "reset":
        return ok()
    return fail(usage, 255)


def cmd_svc(sh, args, stdin):
    phone = sh.phone
    if len(args) >= 2 and args[0] in ("wifi", "data", "bluetooth") and args[1] in ("enable", "disable"):
        key = {"wifi": "wifi_on", "data": "mobile_data", "bluetooth": "bluetooth_on"}[args[0]]
        phone.put_setting("global", key, "1" if args[1] == "enable" else "0")
        return ok()
    if args[:1] == ["power"]:
        return ok()
    return ok("Available commands:\n    help\n    power\n    data\n    wifi\n    usb\n    nfc\n    bluetooth\n")


def cmd_keyevent_names(sh, args, stdin):
    return ok("\n".join(sorted(gestures.KEYCODES)) + "\n")
