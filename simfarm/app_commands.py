"""am, pm, monkey, cmd and content: the virtual phone's activity/package/provider commands."""
import base64
import re

from simfarm import device_commands, real_phone
from simfarm.anomalies import KINDS
from simfarm.shell import Result
from simfarm.shell_commands import fail, ok

ANOMALY_ACTION = "com.sim.ANOMALY"


def parse_intent(args):
    """-n/-a/-d/-c/-p and --es/--ei/--ez extras → dict; unknown flags are skipped."""
    intent = {"extras": {}}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-n", "-a", "-d", "-c", "-p", "-t", "-f", "--user"):
            key = {"-n": "component", "-a": "action", "-d": "data", "-c": "category", "-p": "package",
                   "-t": "type", "-f": "flags", "--user": "user"}[arg]
            intent[key] = args[i + 1] if i + 1 < len(args) else ""
            i += 2
        elif arg in ("--es", "--ei", "--ez", "--el", "--ef", "--eu", "-e"):
            if i + 2 < len(args):
                value = args[i + 2]
                if arg == "--ei":
                    value = int(value)
                elif arg == "--ez":
                    value = value.lower() == "true"
                intent["extras"][args[i + 1]] = value
            i += 3
        elif arg.startswith("-"):
            intent.setdefault("switches", []).append(arg)
            i += 1
        else:
            intent.setdefault("positional", []).append(arg)
            i += 1
    return intent


def _describe(intent):
    parts = []
    if intent.get("action"):
        parts.append(f"act={intent['action']}")
    if intent.get("category"):
        parts.append(f"cat=[{intent['category']}]")
    if intent.get("data"):
        parts.append(f"dat={intent['data']}")
    if intent.get("component"):
        parts.append(f"cmp={intent['component']}")
    if intent.get("extras"):
        parts.append("(has extras)")
    return "Intent { " + " ".join(parts) + " }"


def cmd_am(sh, args, stdin):
    phone = sh.phone
    if not args:
        return fail("usage: am [subcommand] [options]")
    verb, rest = args[0], list(args[1:])
    if verb in ("start", "start-activity"):
        intent = parse_intent(rest)
        if not intent.get("component") and intent.get("positional"):
            intent["component"] = intent["positional"][-1]
        text = f"Starting: {_describe(intent)}\n"
        error = phone.start_activity(intent)
        if error:
            return Result(text.encode(), (error + "\n").encode(), 1)
        if "-W" in intent.get("switches", []):
            package, activity, _ = phone.engine.resumed()
            text += (f"Status: ok\nLaunchState: COLD\nActivity: {package}/{activity}\nTotalTime: 312\n"
                     f"WaitTime: 318\nComplete\n")
        phone.tick()
        return ok(text)
    if verb in ("force-stop", "kill"):
        if not rest:
            return fail("Error: no package specified")
        phone.force_stop(rest[-1])
        return ok()
    if verb == "broadcast":
        intent = parse_intent(rest)
        text = f"Broadcasting: {_describe(intent)}\nBroadcast completed: result=0\n"
        if phone.real_phone and real_phone.farm_only_broadcast(intent.get("action", "")):
            real_phone.refused(phone, f"am broadcast -a {intent.get('action', '')}")
            return ok(text)  # no receiver on a real phone: delivered to nobody
        error = phone.broadcast(intent)
        if error:
            return Result(text.encode(), (error + "\n").encode(), 1)
        if intent.get("action") == ANOMALY_ACTION:
            # The farm's receiver sets RESULT_OK (-1), as a helper app's receiver would; with no receiver
            # Android prints result=0, which is how the console tells that nothing showed.
            text = text.replace("result=0", "result=-1")
        return ok(text)
    if verb == "get-current-user":
        return ok("0\n")
    if verb == "stack" or verb == "task":
        return ok("")
    return fail(f"Error: Unknown command: {verb}")


def handle_broadcast(phone, intent) -> str | None:
    """Broadcast actions the simulated system reacts to; returns an error text or None."""
    action = intent.get("action", "")
    extras = intent.get("extras", {})
    engine = phone.engine
    if action == ANOMALY_ACTION:
        kind = str(extras.get("kind", ""))
        if kind in ("clear", "none"):
            engine.anomalies.clear()
            return None
        params = {k: v for k, v in extras.items() if k not in ("kind", "package")}
        return engine.anomalies.inject(kind, package=extras.get("package"), **params)
    if action == "android.intent.action.BATTERY_LOW":
        return engine.anomalies.inject("low_battery", level=extras.get("level", phone.battery_level))
    if action == "android.intent.action.DEVICE_STORAGE_LOW":
        return engine.anomalies.inject("storage_full")
    if action == "ADB_INPUT_TEXT":
        engine.type_text(str(extras.get("msg", "")))
    elif action == "ADB_INPUT_B64":
        engine.type_text(base64.b64decode(str(extras.get("msg", ""))).decode("utf-8", errors="replace"))
    elif action == "ADB_CLEAR_TEXT":
        spec, ctx = engine.focused_input()
        if spec is not None:
            ctx.assign(spec["bind"], "")
    elif action == "ADB_INPUT_CODE":
        engine.key(str(extras.get("code", "")))
    elif action == "com.sim.RESET":
        phone.reset_ui()
    elif action == "com.sim.FACTORY_RESET":
        phone.factory_reset()
    return None


def cmd_monkey(sh, args, stdin):
    phone = sh.phone
    intent = parse_intent(args)
    package = intent.get("package")
    echo = "".join(f"  bash arg: {a}\n" for a in args)
    if not package or package not in phone.engine.apps:
        return Result(echo.encode(), b"** No activities found to run, monkey aborted.\n", 252)
    phone.engine.launch(package)
    phone.tick()
    return ok(echo + f"args: [{', '.join(args)}]\n" + "".join(f' arg: "{a}"\n' for a in args) +
              f'data="{package}"\n' + ('data="android.intent.category.LAUNCHER"\n' if intent.get("category") else "") +
              "Events injected: 1\n## Network stats: elapsed time=19ms (0ms mobile, 0ms wifi, 19ms not connected)\n")


def cmd_pm(sh, args, stdin):
    phone = sh.phone
    if not args:
        return fail("usage: pm [list|path|clear|install|uninstall|grant|revoke] ...")
    verb, rest = args[0], list(args[1:])
    if verb == "list" and rest[:1] == ["packages"]:
        flags = {a for a in rest[1:] if a.startswith("-")}
        filters = [a for a in rest[1:] if not a.startswith("-")]
        lines = []
        for package, spec in sorted(phone.engine.apps.items()):
            if "-3" in flags and spec.system or "-s" in flags and not spec.system or "-d" in flags:
                continue
            if filters and not any(f in package for f in filters):
                continue
            lines.append(f"package:{phone.apk_path(package)}={package}" if "-f" in flags else f"package:{package}")
        return ok("".join(line + "\n" for line in lines))
    if verb == "list":
        return ok("")
    if verb == "path":
        package = rest[-1] if rest else ""
        if package not in phone.engine.apps:
            return Result(b"", b"", 1)
        return ok(f"package:{phone.apk_path(package)}\n")
    if verb == "clear":
        package = rest[-1] if rest else ""
        if package not in phone.engine.apps:
            return Result(b"Failed\n", b"", 1)
        phone.clear_app(package)
        return ok("Success\n")
    if verb in ("grant", "revoke") and len(rest) >= 2:
        phone.set_permission(rest[-2], rest[-1].rsplit(".", 1)[-1].lower(), "granted" if verb == "grant" else "denied")
        return ok()
    if verb == "uninstall":
        package = rest[-1] if rest else ""
        if package not in phone.engine.apps or phone.engine.apps[package].system:
            return Result(b"Failure [DELETE_FAILED_INTERNAL_ERROR]\n", b"", 1)
        phone.uninstall(package)
        return ok("Success\n")
    if verb in ("install", "install-create"):
        return Result(b"Failure [INSTALL_FAILED_INVALID_APK: the virtual farm cannot install APKs]\n", b"", 1)
    if verb == "dump":
        from simfarm.dumpsys import dumpsys_package
        return ok(dumpsys_package(phone, rest[-1] if rest else ""))
    return fail(f"Unknown command: {verb}")


def cmd_cmd(sh, args, stdin):
    phone = sh.phone
    if not args:
        return fail("cmd: No service specified; use -l to list all running services. Use -w to start and wait for a service.")
    service, rest = args[0], list(args[1:])
    if service == "notification" and rest[:1] == ["post"]:
        options, i = {}, 1
        while i < len(rest) and rest[i].startswith("-"):
            if rest[i] in ("-S", "--style", "-t", "--title", "-i", "--icon", "-I", "--large-icon", "-c", "--conversation"):
                options[rest[i]] = rest[i + 1] if i + 1 < len(rest) else ""
                i += 2
            else:
                i += 1
        positional = rest[i:]
        if len(positional) < 2:
            return fail("usage: cmd notification post [flags] <tag> <text>")
        title = options.get("-t") or options.get("--title") or positional[0]
        phone.engine.anomalies.inject("push_notification", package="com.android.shell", title=title,
                                      text=" ".join(positional[1:]))
        return ok()
    if service == "statusbar":
        if rest[:1] in (["expand-notifications"], ["expand-settings"]):
            phone.engine.open_shade()
        elif rest[:1] == ["collapse"]:
            phone.engine.shade_open = False
            phone.engine.changed()
        return ok()
    if service == "wifi" and rest[:1] == ["set-wifi-enabled"] and len(rest) > 1:
        phone.put_setting("global", "wifi_on", "1" if rest[1] == "enabled" else "0")
        return ok()
    if service == "connectivity" and rest[:1] == ["airplane-mode"] and len(rest) > 1:
        phone.put_setting("global", "airplane_mode_on", "1" if rest[1] == "enable" else "0")
        return ok()
    if service == "clipboard":  # simulator extension: real Android has no shell clipboard command
        if rest[:1] == ["set"]:
            phone.clipboard = " ".join(rest[1:])
            return ok()
        return ok(phone.clipboard + "\n")
    aliases = {"package": cmd_pm, "activity": cmd_am, "input": device_commands.cmd_input,
               "settings": device_commands.cmd_settings}
    if service in aliases:
        return aliases[service](sh, rest, stdin)
    return ok()


_WHERE = re.compile(r"""\s*(\w+)\s*(=|!=|LIKE)\s*('([^']*)'|"([^"]*)"|(\S+))\s*""", re.I)


def _matches(row, where):
    if not where:
        return True
    for clause in re.split(r"\s+AND\s+", where, flags=re.I):
        m = _WHERE.fullmatch(clause)
        if not m:
            return False
        column, op = m.group(1), m.group(2).upper()
        value = next(g for g in (m.group(4), m.group(5), m.group(6)) if g is not None)
        actual = str(row.get(column, ""))
        if op == "LIKE":
            pattern = "^" + re.escape(value).replace("%", ".*").replace("_", ".") + "$"
            if not re.match(pattern, actual, re.I):
                return False
        elif (actual == value) != (op == "="):
            return False
    return True


def cmd_content(sh, args, stdin):
    phone = sh.phone
    if not args or args[0] not in ("query", "insert", "update", "delete"):
        return fail("usage: adb shell content [subcommand] [options]")
    options, i = {}, 1
    binds = []
    while i < len(args):
        if args[i] == "--bind" and i + 1 < len(args):
            binds.append(args[i + 1])
        elif args[i].startswith("--") and i + 1 < len(args):
            options[args[i][2:]] = args[i + 1]
        i += 2
    uri = options.get("uri")
    if not uri:
        return fail("[ERROR] Content provider URI not specified. Did you specify --uri argument?")
    if phone.real_phone and real_phone.farm_only_uri(uri):
        real_phone.refused(phone, f"content {args[0]} --uri {uri}")
        return real_phone.unknown_authority(uri)
    if args[0] != "query":
        return phone.content_write(args[0], uri, binds, options.get("where"))
    rows = phone.content_rows(uri)
    if rows is None:
        return fail(f"Error while accessing provider:{uri.split('/')[2] if uri.count('/') >= 2 else uri}\n"
                    f"java.lang.IllegalArgumentException: Unknown URI {uri}")
    rows = [row for row in rows if _matches(row, options.get("where"))]
    if options.get("sort"):
        column = options["sort"].split()[0]
        rows.sort(key=lambda r: str(r.get(column, "")), reverse="DESC" in options["sort"].upper())
    if not rows:
        return ok("No result found.\n")
    projection = options.get("projection", "").replace(",", ":").split(":") if options.get("projection") else None
    lines = []
    for index, row in enumerate(rows):
        columns = projection or list(row)
        lines.append(f"Row: {index} " + ", ".join(f"{c}={_cell(row.get(c))}" for c in columns))
    return ok("\n".join(lines) + "\n")


def _cell(value):
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return str(len(value)) if isinstance(value, list) else str(value)
    return str(value)


def known_anomaly_kinds():
    return list(KINDS)
