"""`dumpsys` services, shaped like a real phone's output where tools parse them (adbutils regexes).
wifi, bluetooth_manager, role and backup (the Settings app's choices) are in dumpsys_system.py."""
import time

from simfarm import dumpsys_system
from simfarm.shell import Result
from simfarm.shell_commands import ok


def _hex(*parts) -> str:
    value = 0
    for part in parts:
        for char in str(part):
            value = (value * 131 + ord(char)) & 0xFFFFFFF
    return f"{value:07x}"


def _short(package, activity):
    return activity if activity.startswith(".") or "/" in activity else (
        "." + activity[len(package) + 1:] if activity.startswith(package + ".") else activity)


def _full(package, activity):
    return package + activity if activity.startswith(".") else activity


def dumpsys_window(phone, args):
    engine = phone.engine
    focus_package, focus_activity, title = engine.focus()
    if title:
        focus = f"Window{{{_hex(title)} u0 {title}}}"
    else:
        focus = f"Window{{{_hex(focus_package, focus_activity)} u0 {focus_package}/{_full(focus_package, focus_activity)}}}"
    package, activity, task_id = engine.resumed()
    record = f"ActivityRecord{{{_hex(package, activity, task_id)} u0 {package}/{_short(package, activity)} t{task_id}}}"
    lines = ["WINDOW MANAGER WINDOWS (dumpsys window windows)"]
    for i, (pkg, act, _t) in enumerate(_window_list(engine)):
        lines.append(f"  Window #{i} Window{{{_hex(pkg, act)} u0 {pkg}/{_full(pkg, act) if act else ''}}}:")
        lines.append(f"    mDisplayId=0 rootTaskId=1 mSession=Session{{{_hex(pkg)} 1234:u0a10{i}}} mClient=android.os.BinderProxy")
    lines += [
        "",
        f"  mGlobalConfiguration={{1.0 ?mcc?mnc [en_US] ldltr sw411dp w411dp h{phone.height * 160 // phone.density}dp "
        f"{phone.density}dpi nrml long port finger -keyb/v/h -nav/h winConfig={{ mBounds=Rect(0, 0 - {phone.width}, "
        f"{phone.height}) mAppBounds=Rect(0, 0 - {phone.width}, {phone.height}) mWindowingMode=fullscreen mActivityType=undefined mRotation=ROTATION_0}} s.1}}",
        "  mHasPermanentDpad=false",
        "  mTopFocusedDisplayId=0",
        f"  mCurrentFocus={focus}",
        f"  mFocusedApp={record}",
        f"  mInputMethodWindow=Window{{{_hex('ime')} u0 InputMethod}}",
        "  mDisplayFrozen=false",
        "  mRotation=0 mLastOrientation=-1",
    ]
    if args[:1] == ["displays"]:
        lines = ["Display: mDisplayId=0", f"  init={phone.width}x{phone.height} {phone.density}dpi cur={phone.width}x{phone.height} app={phone.width}x{phone.height}"]
    return "\n".join(lines) + "\n"


def _window_list(engine):
    windows = [(t.package, engine.apps[t.package].activity_of(t.top.page_id), t.task_id) for t in reversed(engine.tasks)]
    return windows + [("com.google.android.apps.nexuslauncher", ".NexusLauncherActivity", 1)]


def dumpsys_activity(phone, args):
    engine = phone.engine
    sub = args[0] if args else "activities"
    package, activity, task_id = engine.resumed()
    record = f"ActivityRecord{{{_hex(package, activity, task_id)} u0 {package}/{_short(package, activity)} t{task_id}}}"
    if sub == "top":
        return (f"TASK {package} id={task_id} userId=0\n  ACTIVITY {package}/{_short(package, activity)} "
                f"{_hex(package, activity)} pid={phone.pid_of(package)}\n")
    if sub in ("activities", "a", "recents", "r"):
        lines = ["ACTIVITY MANAGER ACTIVITIES (dumpsys activity activities)", "Display #0 (activities from top to bottom):"]
        for task in reversed(engine.tasks):
            spec = engine.apps[task.package]
            lines.append(f"  * Task{{{_hex(task.task_id)} #{task.task_id} type=standard A={task.package} U=0 visible="
                         f"{str(task is engine.foreground).lower()} mode=fullscreen translucent=false sz={len(task.stack)}}}")
            lines.append(f"    mResumedActivity={record if task is engine.foreground else 'null'}")
            for depth, page in enumerate(reversed(task.stack)):
                act = spec.activity_of(page.page_id)
                lines.append(f"    * Hist  #{len(task.stack) - 1 - depth}: ActivityRecord{{{_hex(task.package, act, depth)} u0 "
                             f"{task.package}/{_short(task.package, act)} t{task.task_id}}}")
        lines.append(f"  * Task{{{_hex('home')} #1 type=home A=com.google.android.apps.nexuslauncher U=0 sz=1}}")
        lines += ["", f"  ResumedActivity: {record}", f"  mResumedActivity: {record}",
                  f"  mFocusedApp={record}", "  mLastPausedActivity: null"]
        return "\n".join(lines) + "\n"
    return "ACTIVITY MANAGER (dumpsys activity)\n"


def dumpsys_display(phone, args):
    w, h, d = phone.width, phone.height, phone.density
    return (f"DISPLAY MANAGER (dumpsys display)\n  mOnlyCode=false\n  mSafeMode=false\n"
            f"  mDisplayDevices:\n    DisplayDeviceInfo{{\"Built-in Screen\": uniqueId=\"local:4619827259835644672\", "
            f"{w} x {h}, modeId 1, defaultModeId 1, supportedModes [{{id=1, width={w}, height={h}, fps=60.0}}], "
            f"density {d}, {d}.0 x {d}.0 dpi, appVsyncOff 0, presDeadline 16666666, touch INTERNAL, rotation 0, "
            f"type INTERNAL, state {'ON' if phone.screen_on else 'OFF'}, FLAG_DEFAULT_DISPLAY, FLAG_ROTATES_WITH_CONTENT}}\n"
            f"  mLogicalDisplays:\n    Display 0:\n      mDisplayId=0\n      mBaseDisplayInfo=DisplayInfo{{\"Built-in Screen\", "
            f"displayId 0, FLAG_SECURE, real {w} x {h}, largest app {w} x {h}, smallest app {w} x {h}, "
            f"density {d} ({d}.0 x {d}.0) dpi, orientation=0, rotation 0, state {'ON' if phone.screen_on else 'OFF'}}}\n"
            f"  mViewports=[DisplayViewport{{type=INTERNAL, valid=true, isActive=true, displayId=0, "
            f"uniqueId='local:4619827259835644672', physicalPort=0, orientation=0, logicalFrame=Rect(0, 0 - {w}, {h}), "
            f"physicalFrame=Rect(0, 0 - {w}, {h}), deviceWidth={w}, deviceHeight={h}}}]\n")


def dumpsys_battery(phone, args):
    if args[:2] == ["set", "level"] and len(args) > 2:
        phone.set_battery_level(int(args[2]))
        return ""
    if args[:1] == ["unplug"]:
        phone.battery_plugged = False
        return ""
    if args[:2] == ["set", "ac"] or args[:2] == ["set", "usb"]:
        phone.battery_plugged = args[2:3] == ["1"]
        return ""
    if args[:1] == ["reset"]:
        phone.battery_plugged = True
        return ""
    plugged = phone.battery_plugged
    return (f"Current Battery Service state:\n  AC powered: false\n  USB powered: {str(plugged).lower()}\n"
            f"  Wireless powered: false\n  Dock powered: false\n  Max charging current: 500000\n"
            f"  Max charging voltage: 5000000\n  Charge counter: {phone.battery_level * 40000}\n"
            f"  status: {2 if plugged and phone.battery_level < 100 else (5 if plugged else 3)}\n  health: 2\n"
            f"  present: true\n  level: {phone.battery_level}\n  scale: 100\n  voltage: 4012\n  temperature: 285\n"
            f"  technology: Li-ion\n")


def dumpsys_package(phone, package):
    spec = phone.engine.apps.get(package)
    if spec is None:
        return ""
    installed = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(phone.boot_time - 86400 * 30))
    perms = phone.permissions.get(package, {})
    lines = ["Packages:", f"  Package [{package}] ({_hex(package)}):", f"    userId=10{int(_hex(package), 16) % 900 + 100}",
             f"    pkg=Package{{{_hex(package, 'pkg')} {package}}}", f"    codePath={phone.apk_path(package).rsplit('/', 1)[0]}",
             f"    versionCode={spec.version_code} minSdk=26 targetSdk=34", f"    versionName={spec.version}",
             f"    pkgFlags=[ {'SYSTEM ' if spec.system else ''}HAS_CODE ALLOW_CLEAR_USER_DATA ALLOW_BACKUP ]",
             f"    firstInstallTime={installed}", f"    lastUpdateTime={installed}",
             f"    signatures=PackageSignatures{{{_hex(package, 'sig')} version:3, signatures:[{_hex(package, 'cert')}], "
             f"past signatures:[]}}", "    runtime permissions:"]
    for name, result in sorted(perms.items()):
        lines.append(f"      android.permission.{name.upper()}: granted={str(result.startswith('granted')).lower()}")
    return "\n".join(lines) + "\n"


def dumpsys_input(phone, args):
    """The real header; then (farm-only) the last motion events, t = ms since their DOWN, and the last gesture."""
    engine = phone.engine
    lines = ["  RecentMotionEvents:"]
    lines += [f"    action={action} x={x} y={y} t={t}ms eventTime={uptime}" for action, x, y, t, uptime in engine.motion_log]
    if phone.real_phone:  # the gesture log is the farm's own; a real phone has no such sections
        lines = []
    elif engine.last_gesture:
        kind, (x1, y1), (x2, y2), duration, moves = engine.last_gesture
        lines.append(f"  LastGesture: {kind} from={x1},{y1} to={x2},{y2} duration={duration}ms moves={moves}")
    return (f"INPUT MANAGER (dumpsys input)\n\nInput Manager State:\n  Interactive: {str(phone.screen_on).lower()}\n"
            f"  Display: 0\n    Viewport INTERNAL: displayId=0, orientation=0, logicalFrame=[0, 0, {phone.width}, {phone.height}]\n"
            f"  SurfaceOrientation: 0\n" + "".join(line + "\n" for line in lines))


def dumpsys_power(phone, args):
    on = phone.screen_on
    return (f"POWER MANAGER (dumpsys power)\n  mWakefulness={'Awake' if on else 'Asleep'}\n"
            f"  mHoldingDisplaySuspendBlocker={str(on).lower()}\n  mIsPowered={str(phone.battery_plugged).lower()}\n"
            f"Display Power: state={'ON' if on else 'OFF'}\n")


def dumpsys_notification(phone, args):
    lines = ["Current Notification Manager state:", "  Notification List:"]
    for note in phone.notifications:
        lines.append(f"    NotificationRecord({_hex(note['id'])}: pkg={note['package']} user=UserHandle{{0}} id={note['id']} "
                     f"tag={note.get('tag')} importance=3)")
        lines.append(f"      android.title=String ({note['title']})")
        lines.append(f"      android.text=String ({note['text']})")
    return "\n".join(lines) + "\n"


def dumpsys_account(phone, args):
    lines = ["User UserInfo{0:Owner:c13}:", f"  Accounts: {len(phone.accounts)}"]
    lines += [f"    Account {{name={name}, type={kind}}}" for kind, name in phone.accounts]
    return "\n".join(lines) + "\n"


SERVICES = {"window": dumpsys_window, "activity": dumpsys_activity, "display": dumpsys_display,
            "battery": dumpsys_battery, "input": dumpsys_input, "power": dumpsys_power,
            "notification": dumpsys_notification, "account": dumpsys_account, **dumpsys_system.SERVICES}


def cmd_dumpsys(sh, args, stdin):
    phone = sh.phone
    if not args or args[0] == "-l":
        return ok("Currently running services:\n" + "".join(f"  {name}\n" for name in sorted(SERVICES) + ["package"]))
    service, rest = args[0], list(args[1:])
    if service == "package":
        if not rest:
            return ok("Package dump requires a package name here\n")
        return ok(dumpsys_package(phone, rest[-1]))
    handler = SERVICES.get(service)
    if handler is None:
        return Result(b"", f"Can't find service: {service}\n".encode(), 0)
    return ok(handler(phone, rest))
