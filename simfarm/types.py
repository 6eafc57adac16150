"""Small types shared by the virtual farm's ADB server and its phones."""
from dataclasses import dataclass


@dataclass(frozen=True)
class ShellResult:
    stdout: bytes
    stderr: bytes = b""
    exit_code: int = 0
    # stdout and stderr interleaved in the order the command wrote them, as a terminal (and the
    # v1 `shell:` service, which has one stream) shows them. None: the server sends stderr first,
    # which keeps adbutils' `...; echo X4EXIT:$?` trailer last.
    combined: bytes | None = None

    @property
    def terminal_output(self) -> bytes:
        return self.combined if self.combined is not None else self.stderr + self.stdout


@dataclass(frozen=True)
class FileStat:
    mode: int  # st_mode as Android reports it (e.g. 0o100644 for a file, 0o040755 for a dir)
    size: int
    mtime: int  # seconds since the epoch
