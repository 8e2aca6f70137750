"""Paths confined to one workspace directory, opened one component at a time without following symlinks.

A path from the model is split into components; ``..`` is refused and an absolute path is accepted
only inside the workspace. Each directory on the way is opened relative to its parent's descriptor
with ``O_NOFOLLOW | O_DIRECTORY``, and the final file with ``O_NOFOLLOW``, so a symlink anywhere in
the path is refused, including one swapped in while the path is being resolved (no check-then-use
window: the descriptor that was checked is the one used).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator

from .._errors import ToolError

__all__ = ("MAX_PATH_CHARS", "Workspace")

MAX_PATH_CHARS = 4096
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Workspace:
    """One directory and the confined ways into it.

    Args:
        root: The workspace directory; it must exist. Its real path (symlinks resolved once, here)
            is the root every path is confined to.
        tool: The tool name errors are reported for.
    """

    def __init__(self, root: str | os.PathLike[str], *, tool: str) -> None:
        self.root = os.path.realpath(os.fspath(root))
        self.tool = tool

    def error(self, message: str) -> ToolError:
        """A business error of this toolset, with a message for the model."""
        return ToolError(message, tool=self.tool)

    def parts(self, path: str) -> list[str]:
        """The components of ``path`` below the root (``[]`` for the root itself)."""
        if "\x00" in path:
            raise self.error(f"The path {path[:100]!r} contains a NUL character; give a plain relative path.")
        if len(path) > MAX_PATH_CHARS:
            raise self.error(f"The path is {len(path)} characters long; the limit is {MAX_PATH_CHARS}.")
        if path.startswith("/"):
            if path == self.root or path.startswith(self.root + "/"):
                path = path[len(self.root) :]
            else:
                raise self.error(
                    f"{path!r} is outside the workspace: paths are relative to the workspace (e.g. "
                    "'notes/todo.txt'); an absolute path must lie inside it."
                )
        parts = [p for p in path.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise self.error(f"{path!r} contains '..': give a path inside the workspace without '..'.")
        return parts

    @staticmethod
    def show(parts: list[str]) -> str:
        """The relative path of ``parts`` as the model wrote it ('.' for the root)."""
        return "/".join(parts) or "."

    def open_root(self) -> int:
        try:
            return os.open(self.root, _DIR_FLAGS)
        except OSError as exc:
            raise self.error(
                f"The workspace directory {self.root!r} cannot be opened ({exc.strerror}); "
                "the developer must create it or give FileTools an existing directory."
            ) from None

    def open_dir(self, parts: list[str], *, create: bool = False) -> int:
        """A descriptor of the directory ``parts`` (made, with its parents, when ``create``)."""
        fd = self.open_root()
        try:
            for i, part in enumerate(parts):
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise self.error(f"No directory {self.show(parts[: i + 1])!r} in the workspace.") from None
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o777, dir_fd=fd)
                    child = self._open_child_dir(fd, parts, i)
                except OSError as exc:
                    raise self._not_dir(fd, parts, i, exc) from None
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _open_child_dir(self, fd: int, parts: list[str], i: int) -> int:
        try:
            return os.open(parts[i], _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            raise self._not_dir(fd, parts, i, exc) from None

    def _not_dir(self, fd: int, parts: list[str], i: int, exc: OSError) -> ToolError:
        where = self.show(parts[: i + 1])
        kind = self.kind_at(fd, parts[i])
        if kind == "symlink" or exc.errno == errno.ELOOP:
            return self.error(f"{where!r} is a symbolic link; symlinks are not followed in the workspace.")
        if exc.errno == errno.ENOTDIR or kind not in (None, "directory"):
            return self.error(f"{where!r} is not a directory.")
        return self.error(f"{where!r} cannot be opened: {exc.strerror}.")

    @staticmethod
    def kind_at(dir_fd: int, name: str) -> str | None:
        """``file``, ``directory``, ``symlink`` or ``other`` for ``name`` in ``dir_fd`` (None: absent)."""
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return None
        return kind_of(st.st_mode)

    def open_file(self, parts: list[str], flags: int, *, create_dirs: bool = False) -> tuple[int, os.stat_result]:
        """Open the regular file ``parts`` with ``flags`` (plus no-follow); refuse anything else.

        The file is opened non-blocking (a FIFO cannot hang the call) and checked with ``fstat`` on
        the descriptor that was opened.
        """
        if not parts:
            raise self.error("The path names the workspace directory itself; give a file path.")
        dir_fd = self.open_dir(parts[:-1], create=create_dirs)
        try:
            try:
                fd = os.open(
                    parts[-1], flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY, 0o666, dir_fd=dir_fd
                )
            except FileNotFoundError:
                raise self.error(f"No file {self.show(parts)!r} in the workspace.") from None
            except FileExistsError:
                raise self.error(
                    f"{self.show(parts)!r} already exists (mode 'create' never replaces a file)."
                ) from None
            except OSError as exc:
                kind = self.kind_at(dir_fd, parts[-1])
                if kind == "symlink" or exc.errno == errno.ELOOP:
                    raise self.error(
                        f"{self.show(parts)!r} is a symbolic link; symlinks are not followed in the workspace."
                    ) from None
                if kind == "directory":
                    raise self.error(f"{self.show(parts)!r} is a directory, not a file.") from None
                if kind == "other":  # a FIFO without a reader (ENXIO), a socket...
                    raise self.error(
                        f"{self.show(parts)!r} is not a regular file; only regular files can be used."
                    ) from None
                raise self.error(f"{self.show(parts)!r} cannot be opened: {exc.strerror}.") from None
        finally:
            os.close(dir_fd)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            what = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise self.error(f"{self.show(parts)!r} is {what}; only regular files can be read or written.")
        os.set_blocking(fd, True)
        return fd, st

    @staticmethod
    def scan(dir_fd: int) -> Iterator[tuple[str, os.stat_result]]:
        """The entries of an open directory, sorted by name, each with its ``lstat``."""
        for name in sorted(os.listdir(dir_fd)):
            try:
                yield name, os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                continue  # removed meanwhile

    @staticmethod
    def open_subdir(dir_fd: int, name: str) -> int | None:
        """A descriptor of subdirectory ``name`` (None when it is not a real directory any more)."""
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except OSError:
            return None


def kind_of(mode: int) -> str:
    """``file``, ``directory``, ``symlink`` or ``other`` for an ``lstat`` mode."""
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"
