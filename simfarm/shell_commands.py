"""Toybox-like file and utility commands of the virtual phone's shell."""
import re
import stat as stat_module
import time

from simfarm.shell import ENV, ExitShell, Result


def ok(text: str = "") -> Result:
    return Result(text.encode(), b"", 0)


def fail(message: str, code: int = 1) -> Result:
    return Result(b"", (message.rstrip("\n") + "\n").encode(), code)


def _flags(args, known: str):
    """Split '-rf' style flags (only letters in `known`) from operands."""
    flags, rest = set(), []
    for arg in args:
        if arg.startswith("-") and len(arg) > 1 and all(c in known for c in arg[1:]) and not rest:
            flags.update(arg[1:])
        else:
            rest.append(arg)
    return flags, rest


def cmd_echo(sh, args, stdin):
    newline = True
    escapes = False
    while args and args[0] in ("-n", "-e", "-ne", "-en", "-E"):
        newline = newline and "n" not in args[0]
        escapes = escapes or "e" in args[0]
        args = args[1:]
    text = " ".join(args)
    if escapes:
        text = text.encode().decode("unicode_escape", errors="replace")
    return ok(text + ("\n" if newline else ""))


def cmd_cat(sh, args, stdin):
    if not args:
        return Result(stdin)
    out, err, code = b"", b"", 0
    for path in args:
        try:
            out += sh.phone.fs.read(path)
        except FileNotFoundError:
            err += f"cat: {path}: No such file or directory\n".encode()
            code = 1
        except IsADirectoryError:
            err += f"cat: {path}: Is a directory\n".encode()
            code = 1
        except ValueError:
            err += f"cat: {path}: No such file or directory\n".encode()
            code = 1
    return Result(out, err, code)


def _mode_text(mode):
    return stat_module.filemode(mode)


def _ls_line(name, st):
    when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(st.mtime))
    return f"{_mode_text(st.mode)} 1 root sdcard_rw {st.size:>8} {when} {name}"


def cmd_ls(sh, args, stdin):
    flags, paths = _flags(args, "laRhd1tsSF")
    fs = sh.phone.fs
    long_format, show_all = "l" in flags, "a" in flags
    out, err, code = [], [], 0
    paths = paths or ["/"]
    for path in paths:
        st = fs.stat(path)
        if st is None:
            err.append(f"ls: {path}: No such file or directory")
            code = 1
            continue
        if stat_module.S_ISDIR(st.mode) and "d" not in flags:
            entries = fs.listdir(path) or []
            if len(paths) > 1:
                out.append(f"{path}:")
            if long_format:
                out.append(f"total {len(entries) * 8}")
            if show_all:
                entries = [(".", st), ("..", st)] + entries
            for name, entry in entries:
                if name.startswith(".") and not show_all:
                    continue
                out.append(_ls_line(name, entry) if long_format else name)
        else:
            out.append(_ls_line(path, st) if long_format else path)
    return Result(("\n".join(out) + "\n").encode() if out else b"",
                  ("\n".join(err) + "\n").encode() if err else b"", code)


def cmd_rm(sh, args, stdin):
    flags, paths = _flags(args, "rfRdv")
    err, code = [], 0
    for path in paths:
        fs = sh.phone.fs
        try:
            if fs.isdir(path) and not ({"r", "R"} & flags):
                err.append(f"rm: {path}: is a directory")
                code = 1
            elif not fs.remove(path, recursive=bool({"r", "R"} & flags)) and "f" not in flags:
                err.append(f"rm: {path}: No such file or directory")
                code = 1
        except (ValueError, IsADirectoryError):
            err.append(f"rm: {path}: No such file or directory")
            code = 1
    if not paths and "f" not in flags:
        return fail("usage: rm [-fiRrv] FILE...")
    return Result(b"", ("\n".join(err) + "\n").encode() if err else b"", code)


def cmd_mkdir(sh, args, stdin):
    flags, paths = _flags(args, "pv")
    for path in paths:
        try:
            sh.phone.fs.mkdir(path, parents="p" in flags)
        except FileExistsError:
            return fail(f"mkdir: '{path}': File exists")
        except (FileNotFoundError, NotADirectoryError, ValueError):
            return fail(f"mkdir: '{path}': No such file or directory")
    return ok()


def cmd_touch(sh, args, stdin):
    fs = sh.phone.fs
    for path in [a for a in args if not a.startswith("-")]:
        try:
            data = fs.read(path) if fs.isfile(path) else b""
            fs.write(path, data)
        except (ValueError, IsADirectoryError, NotADirectoryError):
            return fail(f"touch: '{path}': No such file or directory")
    return ok()


def cmd_mv(sh, args, stdin):
    if len(args) != 2:
        return fail("usage: mv SOURCE DEST")
    try:
        target = args[1]
        if sh.phone.fs.isdir(target):
            target = target.rstrip("/") + "/" + args[0].rstrip("/").rsplit("/", 1)[-1]
        sh.phone.fs.rename(args[0], target)
    except (FileNotFoundError, IsADirectoryError, ValueError):
        return fail(f"mv: bad '{args[0]}': No such file or directory")
    return ok()


def cmd_cp(sh, args, stdin):
    _, paths = _flags(args, "rfpa")
    if len(paths) != 2:
        return fail("usage: cp SOURCE DEST")
    try:
        data = sh.phone.fs.read(paths[0])
        target = paths[1]
        if sh.phone.fs.isdir(target):
            target = target.rstrip("/") + "/" + paths[0].rsplit("/", 1)[-1]
        sh.phone.fs.write(target, data)
    except (FileNotFoundError, IsADirectoryError, ValueError):
        return fail(f"cp: {paths[0]}: No such file or directory")
    return ok()


def cmd_test(sh, args, stdin):
    if args and args[-1] == "]":
        args = args[:-1]
    negate = bool(args) and args[0] == "!"
    if negate:
        args = args[1:]
    fs = sh.phone.fs
    result = False
    if len(args) == 2 and args[0] in ("-e", "-f", "-d", "-s", "-r", "-w", "-x"):
        path = args[1]
        try:
            st = fs.stat(path)
        except ValueError:
            st = None
        if args[0] == "-f":
            result = st is not None and stat_module.S_ISREG(st.mode)
        elif args[0] == "-d":
            result = st is not None and stat_module.S_ISDIR(st.mode)
        elif args[0] == "-s":
            result = st is not None and st.size > 0
        else:
            result = st is not None
    elif len(args) == 2 and args[0] in ("-n", "-z"):
        result = (args[1] != "") == (args[0] == "-n")
    elif len(args) == 3 and args[1] in ("=", "==", "!="):
        result = (args[0] == args[2]) == (args[1] != "!=")
    elif len(args) == 3 and args[1] in ("-eq", "-ne", "-lt", "-gt", "-le", "-ge"):
        try:
            a, b = int(args[0]), int(args[2])
        except ValueError:
            return fail("test: bad number", 2)
        result = {"-eq": a == b, "-ne": a != b, "-lt": a < b, "-gt": a > b, "-le": a <= b, "-ge": a >= b}[args[1]]
    elif len(args) == 1:
        result = args[0] != ""
    return Result(b"", b"", 0 if result != negate else 1)


def cmd_exit(sh, args, stdin):
    try:
        code = int(args[0]) if args else sh.last_code
    except ValueError:
        code = 2
    raise ExitShell(code & 0xFF)


def cmd_sleep(sh, args, stdin):
    try:
        seconds = float(args[0]) if args else 0.0
    except ValueError:
        return fail(f"sleep: invalid number '{args[0]}'")
    sh.phone.advance_clock(seconds)  # simulated time: deterministic and instant
    return ok()


def cmd_date(sh, args, stdin):
    now = sh.phone.now()
    if args and args[0].startswith("+"):
        fmt = args[0][1:].replace("%N", "000000000")
        return ok(time.strftime(fmt, time.gmtime(now)) + "\n")
    return ok(time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(now)) + "\n")


def cmd_which(sh, args, stdin):
    found = [f"/system/bin/{name}" for name in args if name in sh.commands]
    return Result(("\n".join(found) + "\n").encode() if found else b"", b"", 0 if len(found) == len(args) else 1)


def cmd_grep(sh, args, stdin):
    flags, rest = _flags(args, "ivEcqnwFo")
    if not rest:
        return fail("usage: grep [-ivEc] PATTERN [FILE]...", 2)
    pattern = rest[0]
    data = stdin
    if len(rest) > 1:
        try:
            data = b"".join(sh.phone.fs.read(p) for p in rest[1:])
        except (FileNotFoundError, IsADirectoryError, ValueError):
            return fail(f"grep: {rest[1]}: No such file or directory", 2)
    regex = re.compile(re.escape(pattern) if "F" in flags else pattern, re.I if "i" in flags else 0)
    lines = [line for line in data.decode(errors="replace").splitlines()
             if bool(regex.search(line)) != ("v" in flags)]
    if "q" in flags:
        return Result(b"", b"", 0 if lines else 1)
    if "c" in flags:
        return Result(f"{len(lines)}\n".encode(), b"", 0 if lines else 1)
    return Result(("\n".join(lines) + "\n").encode() if lines else b"", b"", 0 if lines else 1)


def _count_arg(args, default=10):
    flags = [a for a in args if a.startswith("-")]
    for i, arg in enumerate(args):
        if arg == "-n" and i + 1 < len(args):
            return int(args[i + 1])
        if arg.startswith("-") and arg[1:].isdigit():
            return int(arg[1:])
    return default if not flags else default


def cmd_head(sh, args, stdin):
    return Result(("".join(stdin.decode(errors="replace").splitlines(True)[:_count_arg(args)])).encode())


def cmd_tail(sh, args, stdin):
    lines = stdin.decode(errors="replace").splitlines(True)
    return Result("".join(lines[-_count_arg(args):]).encode())


def cmd_wc(sh, args, stdin):
    text = stdin.decode(errors="replace")
    if "-l" in args:
        return ok(f"{text.count(chr(10))}\n")
    return ok(f"{text.count(chr(10))} {len(text.split())} {len(stdin)}\n")


def cmd_sort(sh, args, stdin):
    lines = sorted(stdin.decode(errors="replace").splitlines(), reverse="-r" in args)
    return ok("\n".join(lines) + ("\n" if lines else ""))


def cmd_uname(sh, args, stdin):
    if "-a" in args:
        return ok("Linux localhost 5.15.110-android14-11 #1 SMP PREEMPT aarch64 Toybox\n")
    return ok("Linux\n")


def cmd_ifconfig(sh, args, stdin):
    phone = sh.phone
    if not phone.wifi_on:
        return fail("ifconfig: wlan0: No such device")
    return ok(f"wlan0     Link encap:UNSPEC    Driver cnss_pci\n          inet addr:{phone.ip_address}  "
              f"Bcast:192.168.1.255  Mask:255.255.255.0\n          UP BROADCAST RUNNING MULTICAST  MTU:1500  Metric:1\n")


def cmd_ip(sh, args, stdin):
    phone = sh.phone
    if not phone.wifi_on:
        return ok("")
    return ok(f"30: wlan0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc mq state UP group default qlen 3000\n"
              f"    inet {phone.ip_address}/24 brd 192.168.1.255 scope global wlan0\n")


def cmd_env(sh, args, stdin):
    return ok("".join(f"{k}={v}\n" for k, v in sorted(ENV.items())))


def cmd_ps(sh, args, stdin):
    lines = ["USER           PID  PPID     VSZ    RSS WCHAN            ADDR S NAME"]
    for pid, name in sh.phone.processes():
        lines.append(f"u0_a{100 + pid % 200:<9} {pid:>5}   1 1000000  90000 0                   0 S {name}")
    return ok("\n".join(lines) + "\n")


DATA_PARTITION_KB = 64 * 1024 * 1024       # a 64 GB phone
DATA_SYSTEM_USED_KB = 18 * 1024 * 1024     # apps, caches and the OS's own share of /data


def cmd_df(sh, args, stdin):
    """`df [-k] [/data]`: toybox's table for the data partition; files the phone holds count as used."""
    used = DATA_SYSTEM_USED_KB + sh.phone.fs.used_bytes() // 1024
    free = max(0, DATA_PARTITION_KB - used)
    percent = -(-used * 100 // DATA_PARTITION_KB)
    return ok("Filesystem       1K-blocks     Used Available Use% Mounted on\n"
              f"/dev/block/dm-5 {DATA_PARTITION_KB:>10} {used:>8} {free:>9} {percent:>3}% /data\n")


def cmd_pidof(sh, args, stdin):
    pids = [str(pid) for pid, name in sh.phone.processes() if name in args]
    return Result((" ".join(pids) + "\n").encode() if pids else b"", b"", 0 if pids else 1)


COMMANDS = {
    "echo": cmd_echo, "cat": cmd_cat, "ls": cmd_ls, "rm": cmd_rm, "mkdir": cmd_mkdir, "touch": cmd_touch,
    "mv": cmd_mv, "cp": cmd_cp, "test": cmd_test, "[": cmd_test, "exit": cmd_exit, "sleep": cmd_sleep,
    "date": cmd_date, "which": cmd_which, "grep": cmd_grep, "head": cmd_head, "tail": cmd_tail, "wc": cmd_wc,
    "sort": cmd_sort, "uname": cmd_uname, "ifconfig": cmd_ifconfig, "ip": cmd_ip, "env": cmd_env,
    "ps": cmd_ps, "pidof": cmd_pidof, "df": cmd_df,
    "true": lambda sh, a, i: ok(), "false": lambda sh, a, i: Result(b"", b"", 1),
    "whoami": lambda sh, a, i: ok("shell\n"), "pwd": lambda sh, a, i: ok("/\n"), "cd": lambda sh, a, i: ok(),
    "id": lambda sh, a, i: ok("uid=2000(shell) gid=2000(shell) groups=2000(shell),1004(input),1007(log),"
                              "1011(adb),1015(sdcard_rw),1028(sdcard_r),3001(net_bt_admin),3002(net_bt),3003(inet) "
                              "context=u:r:shell:s0\n"),
    "sync": lambda sh, a, i: ok(), "logcat": lambda sh, a, i: ok(), "log": lambda sh, a, i: ok(),
    "reboot": lambda sh, a, i: ok(), "chmod": lambda sh, a, i: ok(), "setenforce": lambda sh, a, i: ok(),
    "getenforce": lambda sh, a, i: ok("Enforcing\n"),
}
