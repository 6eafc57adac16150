"""A small POSIX-ish shell for the virtual phone: the command lines adb and adbutils send.

Supports quoting ('', "", backslash), `;` `&&` `||` `|` `&`, redirections (`>`, `>>`, `2>`,
`2>&1`, `&>`, `<`), `$?` / `$VAR`, and globs on unquoted words. Commands live in
shell_commands.py and friends; an unknown one answers like mksh: `NAME: not found`, exit 127.
"""
import fnmatch
import posixpath
import re
from dataclasses import dataclass, field

_DUP = re.compile(r"^(\d*)>&(\d+)$")
_REDIR = re.compile(r"^(\d*|&)(>>|>|<)$")
EXIT_MARK = "\x00?\x00"
OPERATORS = ("&&", "||", ";", "|", "&", "\n")
ENV = {"EXTERNAL_STORAGE": "/sdcard", "HOME": "/", "PATH": "/product/bin:/apex/com.android.runtime/bin:/system/bin:/system/xbin",
       "ANDROID_DATA": "/data", "ANDROID_ROOT": "/system", "USER": "shell", "SHELL": "/system/bin/sh", "TMPDIR": "/data/local/tmp"}


class ShellSyntaxError(ValueError):
    pass


class ExitShell(Exception):
    def __init__(self, code):
        self.code = code


@dataclass
class Word:
    text: str
    globbable: bool = False   # had an unquoted * or ?


@dataclass
class Command:
    argv: list = field(default_factory=list)
    redirects: list = field(default_factory=list)   # (fd, mode, target): mode in > >> < >&


@dataclass
class Result:
    stdout: bytes = b""
    stderr: bytes = b""
    code: int = 0
    combined: bytes = b""   # both streams in the order a terminal shows them


def tokenize(line: str, last_code: int = 0):
    """Split a command line into ('word', Word) and ('op', text) tokens."""
    tokens = []
    i, n = 0, len(line)
    buf, in_word, globbable = [], False, False

    def flush():
        nonlocal buf, in_word, globbable
        if in_word:
            tokens.append(("word", Word("".join(buf), globbable)))
        buf, in_word, globbable = [], False, False

    while i < n:
        c = line[i]
        if c in " \t\r":
            flush()
            i += 1
        elif c == "'":
            end = line.find("'", i + 1)
            if end < 0:
                raise ShellSyntaxError("unterminated quoted string")
            buf.append(line[i + 1:end])
            in_word, i = True, end + 1
        elif c == '"':
            i += 1
            in_word = True
            while i < n and line[i] != '"':
                if line[i] == "\\" and i + 1 < n and line[i + 1] in '"\\$`':
                    buf.append(line[i + 1])
                    i += 2
                elif line[i] == "$":
                    text, i = _expand_var(line, i, last_code)
                    buf.append(text)
                else:
                    buf.append(line[i])
                    i += 1
            if i >= n:
                raise ShellSyntaxError("unterminated quoted string")
            i += 1
        elif c == "\\":
            if i + 1 < n:
                buf.append(line[i + 1] if line[i + 1] != "\n" else "")
            in_word, i = True, i + 2
        elif c == "$":
            text, i = _expand_var(line, i, last_code)
            buf.append(text)
            in_word = True
        elif c == "#" and not in_word:
            while i < n and line[i] != "\n":
                i += 1
        elif c in "<>" or (c.isdigit() and not in_word and i + 1 < n and line[i + 1] == ">") or \
                (c == "&" and i + 1 < n and line[i + 1] == ">"):
            flush()
            j = i
            while j < n and (line[j].isdigit() or line[j] in "<>&"):
                j += 1
            tokens.append(("redir", line[i:j]))
            i = j
        elif line.startswith("&&", i) or line.startswith("||", i):
            flush()
            tokens.append(("op", line[i:i + 2]))
            i += 2
        elif c in ";|&\n":
            flush()
            tokens.append(("op", c))
            i += 1
        else:
            if c in "*?":
                globbable = True
            buf.append(c)
            in_word = True
            i += 1
    flush()
    return tokens


def _expand_var(line, i, last_code):
    """`$?`, `$NAME`, `${NAME}` → (text, next index)."""
    if i + 1 < len(line) and line[i + 1] == "?":
        return EXIT_MARK, i + 2  # filled in when the command runs: `a; echo $?` sees a's code
    if i + 1 < len(line) and line[i + 1] == "{":
        end = line.find("}", i)
        if end > 0:
            return ENV.get(line[i + 2:end], ""), end + 1
    j = i + 1
    while j < len(line) and (line[j].isalnum() or line[j] == "_"):
        j += 1
    if j == i + 1:
        return "$", i + 1
    return ENV.get(line[i + 1:j], ""), j


def parse(tokens):
    """→ list of (connector, [Command, ...]) where connector says when the pipeline runs."""
    sequence, pipeline, command = [], [], Command()
    connector = ";"
    it = iter(range(len(tokens)))
    for index in it:
        kind, value = tokens[index]
        if kind == "word":
            command.argv.append(value)
        elif kind == "redir":
            dup = _DUP.match(value)
            if dup:
                command.redirects.append((dup.group(1) or "1", ">&", dup.group(2)))
                continue
            plain = _REDIR.match(value)
            if not plain:
                raise ShellSyntaxError(f"syntax error: '{value}' unexpected")
            if index + 1 >= len(tokens) or tokens[index + 1][0] != "word":
                raise ShellSyntaxError(f"syntax error: missing target after '{value}'")
            mode = "&>" if plain.group(1) == "&" else plain.group(2)
            fd = "1" if plain.group(1) == "&" else (plain.group(1) or ("0" if mode == "<" else "1"))
            command.redirects.append((fd, mode, tokens[index + 1][1].text))
            next(it, None)
        else:
            if value == "|":
                if not command.argv:
                    raise ShellSyntaxError("syntax error: '|' unexpected")
                pipeline.append(command)
                command = Command()
                continue
            if command.argv or command.redirects:
                pipeline.append(command)
            elif pipeline:
                raise ShellSyntaxError(f"syntax error: '{value}' unexpected")
            if pipeline:
                sequence.append((connector, pipeline))
            elif value in ("&&", "||"):
                raise ShellSyntaxError(f"syntax error: '{value}' unexpected")
            pipeline, command = [], Command()
            connector = value if value in ("&&", "||") else ";"
    if command.argv or command.redirects:
        pipeline.append(command)
    if pipeline:
        sequence.append((connector, pipeline))
    elif connector in ("&&", "||"):
        raise ShellSyntaxError("syntax error: unexpected end of file")
    return sequence


def expand_globs(fs, words, cwd="/"):
    out = []
    for word in words:
        if not word.globbable:
            out.append(word.text)
            continue
        directory, pattern = posixpath.split(word.text)
        base = directory or cwd
        entries = fs.listdir(base) if base.startswith("/") else None
        matches = sorted(posixpath.join(directory, name) if directory else name
                         for name, _ in (entries or []) if fnmatch.fnmatchcase(name, pattern) and not name.startswith("."))
        out.extend(matches or [word.text])
    return out


class Shell:
    """Runs one command line against a phone; `commands` maps a name to fn(sh, args, stdin) -> Result."""

    def __init__(self, phone, commands):
        self.phone = phone
        self.commands = commands
        self.last_code = 0

    def run(self, line: str) -> Result:
        total = Result()
        try:
            sequence = parse(tokenize(line, self.last_code))
        except ShellSyntaxError as exc:
            message = f"/system/bin/sh: {exc}\n".encode()
            return Result(b"", message, 2, message)
        code = 0
        try:
            for connector, pipeline in sequence:
                if (connector == "&&" and code != 0) or (connector == "||" and code == 0):
                    continue
                result = self.run_pipeline(pipeline)
                total.stdout += result.stdout
                total.stderr += result.stderr
                total.combined += result.stderr + result.stdout
                code = self.last_code = result.code
        except ExitShell as done:
            code = done.code
        total.code = code
        return total

    def run_pipeline(self, pipeline) -> Result:
        stdin = b""
        result = Result()
        stderr = b""
        for command in pipeline:
            result = self.run_command(command, stdin)
            stdin = result.stdout
            stderr += result.stderr
        return Result(result.stdout, stderr, result.code)

    def run_command(self, command: Command, stdin: bytes) -> Result:
        argv = [arg.replace(EXIT_MARK, str(self.last_code)) for arg in expand_globs(self.phone.fs, command.argv)]
        for _fd, mode, target in command.redirects:
            if mode == "<":
                try:
                    stdin = self.phone.fs.read(target)
                except (FileNotFoundError, IsADirectoryError, ValueError):
                    return Result(b"", f"/system/bin/sh: can't open {target}: No such file or directory\n".encode(), 1)
        if not argv:
            result = Result()
        else:
            name = posixpath.basename(argv[0])
            handler = self.commands.get(name)
            if handler is None:
                return Result(b"", f"/system/bin/sh: {argv[0]}: inaccessible or not found\n".encode()
                              if "/" in argv[0] else f"/system/bin/sh: {name}: not found\n".encode(), 127)
            result = handler(self, argv[1:], stdin)
        return self.apply_redirects(command.redirects, result)

    def apply_redirects(self, redirects, result: Result) -> Result:
        stdout, stderr = result.stdout, result.stderr
        for fd, mode, target in redirects:
            if mode == ">&":
                if fd == "2" and target == "1":
                    stdout, stderr = stdout + stderr, b""
                elif fd == "1" and target == "2":
                    stdout, stderr = b"", stderr + stdout
                continue
            if mode not in (">", ">>", "&>"):
                continue
            data = stdout + stderr if mode == "&>" else (stderr if fd == "2" else stdout)
            if mode == "&>" or fd == "1":
                stdout = b""
            if mode == "&>" or fd == "2":
                stderr = b""
            if target in ("/dev/null",):
                continue
            if target in ("/dev/stderr",):
                stderr += data
                continue
            if target in ("/dev/stdout", "/dev/tty"):
                stdout += data
                continue
            try:
                if mode == ">>":
                    self.phone.fs.append(target, data)
                else:
                    self.phone.fs.write(target, data)
            except (IsADirectoryError, NotADirectoryError, ValueError, FileNotFoundError) as exc:
                return Result(stdout, stderr + f"/system/bin/sh: can't create {target}: {type(exc).__name__}\n".encode(), 1)
        return Result(stdout, stderr, result.code)
