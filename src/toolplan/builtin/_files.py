"""`FileTools`: read, write, list, search, stat and delete files in one workspace directory."""

from __future__ import annotations

import base64
import binascii
import codecs
import errno
import fnmatch
import os
import stat
from collections import deque
from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from .._errors import ToolError, UserError
from ..tools import FunctionTool, ToolAnnotations, Toolset
from ._names import ToolNames, check_names
from ._paths import Workspace, kind_of

__all__ = ("DeleteResult", "FileEntry", "FileTools", "ReadResult", "SearchMatch", "StatResult", "WriteResult")

_MiB = 1024 * 1024
_READ = ToolAnnotations(read_only=True, idempotent=True, timeout=30.0)
# Writing the same content twice leaves the same file (overwrite), but append does not: not idempotent.
_WRITE = ToolAnnotations(destructive=True, timeout=30.0)
_BINARY_SNIFF = 8192
_MAX_OFFSET = 2**63 - 1  # the largest file offset the OS takes
_MAX_LINE_CHARS = 300


class ReadResult(TypedDict):
    """What `FileTools.read_file` returns."""

    path: str
    content: str
    encoding: Literal["utf-8", "base64"]
    size: int
    offset: int
    bytes_read: int
    truncated: bool
    next_offset: NotRequired[int]


class WriteResult(TypedDict):
    """What `FileTools.write_file` returns."""

    path: str
    bytes_written: int
    size: int
    created: bool


class FileEntry(TypedDict):
    """One entry of `FileTools.list_files`."""

    path: str
    type: Literal["file", "directory", "symlink", "other"]
    size: int


class ListResult(TypedDict):
    """What `FileTools.list_files` returns."""

    path: str
    entries: list[FileEntry]
    truncated: bool


class SearchMatch(TypedDict):
    """One matching line of `FileTools.search_files`."""

    path: str
    line: int
    text: str


class StatResult(TypedDict):
    """What `FileTools.stat_file` returns (``type``, ``size``... only when the path exists)."""

    path: str
    exists: bool
    type: NotRequired[Literal["file", "directory", "symlink", "other"]]
    size: NotRequired[int]
    modified: NotRequired[float]
    mode: NotRequired[str]
    links: NotRequired[int]


class DeleteResult(TypedDict):
    """What `FileTools.delete_file` returns."""

    path: str
    deleted: Literal["file", "directory"]


class SearchResult(TypedDict):
    """What `FileTools.search_files` returns."""

    matches: list[SearchMatch]
    files_searched: int
    files_skipped: int
    truncated: bool


class FileTools(Toolset):
    """Read, write, list and search files inside one workspace directory.

    Every path is relative to the workspace (an absolute path is accepted only inside it). ``..`` is
    refused, symlinks are never followed (a symlink in a path is an error, and listing shows it
    without entering it), only regular files are read or written (a FIFO or device is refused without
    blocking), a file with more than one hard link is never written (another link may lie outside the
    workspace), and each call is bounded in bytes and entries. Failures the model can fix (a missing
    file, a path outside the workspace) are business errors with a message saying what to do.

    Functions: ``read_file``, ``list_files`` and ``search_files`` (read-only, idempotent) and
    ``write_file`` (destructive; left out with ``read_only=True``). With ``names="oasis"``:
    ``file_read``, ``file_list``, ``file_stat`` (read-only, idempotent), ``file_write`` and
    ``file_delete`` (destructive; left out with ``read_only=True``).

    Args:
        workspace: The directory the tools work in; it must exist.
        read_only: Offer only the reading functions.
        max_read_bytes: Most bytes one ``read_file`` returns (the rest is read with ``offset``); also
            the largest file ``search_files`` looks into.
        max_write_bytes: Largest content one ``write_file`` writes.
        max_list_entries: Most entries one ``list_files`` returns.
        max_search_matches: Most matches one ``search_files`` returns.
        max_search_bytes: Most bytes one ``search_files`` reads in all.
        max_depth: How deep ``list_files`` and ``search_files`` recurse.
        names: ``"toolplan"`` (the names above) or ``"oasis"`` (the ``file_*`` names).
        prefix: Put in front of every function name (see `Toolset`).
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        read_only: bool = False,
        max_read_bytes: int = _MiB,
        max_write_bytes: int = _MiB,
        max_list_entries: int = 1000,
        max_search_matches: int = 200,
        max_search_bytes: int = 32 * _MiB,
        max_depth: int = 16,
        names: ToolNames = "toolplan",
        prefix: str = "",
    ) -> None:
        check_names("FileTools", names)
        for name, value in (
            ("max_read_bytes", max_read_bytes),
            ("max_write_bytes", max_write_bytes),
            ("max_list_entries", max_list_entries),
            ("max_search_matches", max_search_matches),
            ("max_search_bytes", max_search_bytes),
            ("max_depth", max_depth),
        ):
            if value < 1:
                raise UserError(f"FileTools({name}={value}): it must be at least 1.")
        self.workspace = Workspace(workspace, tool=f"{prefix}files")
        if not os.path.isdir(self.workspace.root):
            raise UserError(
                f"FileTools workspace {os.fspath(workspace)!r} is not a directory. Create it first "
                "(os.makedirs(path, exist_ok=True)) or pass an existing directory."
            )
        self.max_read_bytes = max_read_bytes
        self.max_write_bytes = max_write_bytes
        self.max_list_entries = max_list_entries
        self.max_search_matches = max_search_matches
        self.max_search_bytes = max_search_bytes
        self.max_depth = max_depth
        functions: list[FunctionTool[Any]]
        if names == "oasis":
            functions = [
                FunctionTool(self.read_file, name="file_read", annotations=_READ),
                FunctionTool(self.list_files, name="file_list", annotations=_READ),
                FunctionTool(self.stat_file, name="file_stat", annotations=_READ),
            ]
            if not read_only:
                functions.append(FunctionTool(self.write_file, name="file_write", annotations=_WRITE))
                functions.append(FunctionTool(self.delete_file, name="file_delete", annotations=_WRITE))
        else:
            functions = [
                FunctionTool(self.read_file, annotations=_READ),
                FunctionTool(self.list_files, annotations=_READ),
                FunctionTool(self.search_files, annotations=_READ),
            ]
            if not read_only:
                functions.append(FunctionTool(self.write_file, annotations=_WRITE))
        super().__init__(functions, prefix=prefix)

    @property
    def root(self) -> str:
        """The workspace directory (its real path)."""
        return self.workspace.root

    # -- read ----------------------------------------------------------------------------------------
    def read_file(
        self,
        path: str,
        offset: int = 0,
        max_bytes: int | None = None,
        encoding: Literal["utf-8", "base64"] = "utf-8",
    ) -> ReadResult:
        """Read a file of the workspace.

        Returns at most the toolset's read limit; when the file is longer, ``truncated`` is true and
        ``next_offset`` says where to continue.

        Args:
            path: File path relative to the workspace, e.g. 'reports/q3.txt'.
            offset: Byte offset to start reading at.
            max_bytes: Read at most this many bytes (capped by the toolset's limit).
            encoding: 'utf-8' for text, 'base64' for binary files.
        """
        ws = self.workspace
        if not 0 <= offset <= _MAX_OFFSET:
            raise ws.error(f"offset must be between 0 and {_MAX_OFFSET} (a byte position in the file).")
        limit = self.max_read_bytes if max_bytes is None else max(0, min(max_bytes, self.max_read_bytes))
        parts = ws.parts(path)
        fd, st = ws.open_file(parts, os.O_RDONLY)
        try:
            data = os.pread(fd, limit, offset) if offset < st.st_size else b""
            # The file may have grown since fstat: what matters is whether more follows.
            end = offset + len(data)
            more = bool(os.pread(fd, 1, end)) if len(data) == limit and end < _MAX_OFFSET else False
        finally:
            os.close(fd)
        if encoding == "base64":
            content = base64.b64encode(data).decode("ascii")
            used = len(data)
        else:
            text, used = _decode_utf8(data, final=not more)
            if text is None:
                raise ws.error(
                    f"{ws.show(parts)!r} is not UTF-8 text (at byte {offset + used}); read it with encoding='base64'."
                )
            content = text
            more = more or used < len(data)
        result: ReadResult = {
            "path": ws.show(parts),
            "content": content,
            "encoding": encoding,
            "size": st.st_size,
            "offset": offset,
            "bytes_read": used,
            "truncated": more,
        }
        if more:
            result["next_offset"] = offset + used
        return result

    # -- write ---------------------------------------------------------------------------------------
    def write_file(
        self,
        path: str,
        content: str,
        mode: Literal["overwrite", "append", "create"] = "overwrite",
        encoding: Literal["utf-8", "base64"] = "utf-8",
    ) -> WriteResult:
        """Write a file of the workspace, making missing parent directories.

        Args:
            path: File path relative to the workspace, e.g. 'out/summary.md'.
            content: The text to write (base64 text when encoding is 'base64').
            mode: 'overwrite' replaces the file, 'append' adds to its end, 'create' fails if it exists.
            encoding: 'utf-8' for text, 'base64' for binary content.
        """
        ws = self.workspace
        if encoding == "base64":
            try:
                data = base64.b64decode(content, validate=True)
            except (binascii.Error, ValueError):
                raise ws.error("content is not valid base64; send text with encoding='utf-8'.") from None
        else:
            data = content.encode("utf-8", "replace")
        if len(data) > self.max_write_bytes:
            raise ws.error(
                f"The content is {len(data)} bytes; one write takes at most {self.max_write_bytes}. "
                "Write it in parts with mode='append'."
            )
        parts = ws.parts(path)
        flags = os.O_WRONLY | os.O_CREAT
        flags |= {"overwrite": 0, "append": os.O_APPEND, "create": os.O_EXCL}[mode]
        existed = self._exists(parts)
        fd, st = ws.open_file(parts, flags, create_dirs=True)
        try:
            if st.st_nlink > 1:
                # Another name for the same file may lie outside the workspace: writing would change it.
                raise ws.error(
                    f"{ws.show(parts)!r} has {st.st_nlink} hard links, and a link may lie outside the workspace, "
                    "so it is not written. Write to a new path instead."
                )
            if mode == "overwrite":
                os.ftruncate(fd, 0)  # after the regular-file check, never through a symlink
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        return {"path": ws.show(parts), "bytes_written": len(data), "size": size, "created": not existed}

    def _exists(self, parts: list[str]) -> bool:
        try:
            fd = self.workspace.open_dir(parts[:-1])
        except ToolError:
            return False
        try:
            return self.workspace.kind_at(fd, parts[-1]) is not None if parts else True
        finally:
            os.close(fd)

    # -- stat and delete -----------------------------------------------------------------------------
    def stat_file(self, path: str) -> StatResult:
        """Say whether a workspace path exists and what it is (a symlink is described, not followed).

        Args:
            path: Path relative to the workspace, e.g. 'reports/q3.txt' ('.' for the workspace).
        """
        ws = self.workspace
        parts = ws.parts(path)
        fd = ws.open_dir(parts[:-1])
        try:
            try:
                st = os.stat(parts[-1] if parts else ".", dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                return {"path": ws.show(parts), "exists": False}
            except OSError as exc:
                raise ws.error(f"{ws.show(parts)!r} cannot be examined: {exc.strerror}.") from None
        finally:
            os.close(fd)
        return {
            "path": ws.show(parts),
            "exists": True,
            "type": _kind(st.st_mode),
            "size": st.st_size,
            "modified": st.st_mtime,
            "mode": f"{stat.S_IMODE(st.st_mode):04o}",
            "links": st.st_nlink,
        }

    def delete_file(self, path: str) -> DeleteResult:
        """Delete a file, or an empty directory, of the workspace.

        Symbolic links and files with more than one hard link are not deleted; a directory must be
        empty (delete what is in it first).

        Args:
            path: Path relative to the workspace, e.g. 'out/old.txt'.
        """
        ws = self.workspace
        parts = ws.parts(path)
        if not parts:
            raise ws.error("The path names the workspace directory itself; give a file path.")
        where = ws.show(parts)
        fd = ws.open_dir(parts[:-1])  # every directory on the way: confined, no symlink followed
        try:
            try:
                st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                raise ws.error(f"No file {where!r} in the workspace.") from None
            kind = kind_of(st.st_mode)
            if kind == "symlink":
                raise ws.error(f"{where!r} is a symbolic link; symlinks are not followed in the workspace.")
            if kind == "other":
                raise ws.error(f"{where!r} is not a regular file; only files and empty directories are deleted.")
            if kind == "file" and st.st_nlink > 1:
                raise ws.error(
                    f"{where!r} has {st.st_nlink} hard links, and a link may lie outside the workspace, "
                    "so it is not deleted."
                )
            try:
                # unlink and rmdir act on the name in this directory and never follow a symlink, even
                # one swapped in since the check.
                if kind == "directory":
                    os.rmdir(parts[-1], dir_fd=fd)
                else:
                    os.unlink(parts[-1], dir_fd=fd)
            except FileNotFoundError:
                raise ws.error(f"No file {where!r} in the workspace.") from None
            except OSError as exc:
                if kind == "directory" and exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    raise ws.error(f"The directory {where!r} is not empty; delete the files in it first.") from None
                raise ws.error(f"{where!r} cannot be deleted: {exc.strerror}.") from None
        finally:
            os.close(fd)
        return {"path": where, "deleted": "directory" if kind == "directory" else "file"}

    # -- list ----------------------------------------------------------------------------------------
    def list_files(
        self,
        path: str = ".",
        recursive: bool = False,
        pattern: str | None = None,
        include_hidden: bool = False,
    ) -> ListResult:
        """List the entries of a workspace directory (symlinks are shown, never entered).

        Args:
            path: Directory relative to the workspace ('.' for the workspace itself).
            recursive: Also list subdirectories, depth first by name.
            pattern: Only entries whose name matches this glob, e.g. '*.csv'.
            include_hidden: Include names starting with '.'.
        """
        ws = self.workspace
        parts = ws.parts(path)
        entries: list[FileEntry] = []
        truncated = False
        for rel, name, st in self._walk(parts, recursive=recursive, include_hidden=include_hidden):
            if pattern is not None and not fnmatch.fnmatchcase(name, pattern):
                continue
            if len(entries) >= self.max_list_entries:
                truncated = True
                break
            entries.append({"path": rel, "type": _kind(st.st_mode), "size": st.st_size})
        return {"path": ws.show(parts), "entries": entries, "truncated": truncated}

    def _walk(
        self, parts: list[str], *, recursive: bool, include_hidden: bool
    ) -> list[tuple[str, str, os.stat_result]]:
        """``(relative path, name, lstat)`` of the entries below ``parts``, depth first, by name.

        Bounded: it looks at no more than a few times ``max_list_entries`` entries, and no deeper
        than ``max_depth``; it never enters a symlink.
        """
        out: list[tuple[str, str, os.stat_result]] = []
        budget = self.max_list_entries * 4 + 1000  # entries looked at, hidden or filtered ones included
        top = self.workspace.open_dir(parts)
        stack: deque[tuple[int, list[str], int]] = deque([(top, parts, 0)])
        try:
            while stack:
                fd, where, depth = stack.pop()
                try:
                    children: list[tuple[int, list[str], int]] = []
                    for name, st in self.workspace.scan(fd):
                        if not include_hidden and name.startswith("."):
                            continue
                        budget -= 1
                        if budget < 0:
                            return out
                        rel = "/".join([*where, name])
                        out.append((rel, name, st))
                        if recursive and kind_of(st.st_mode) == "directory" and depth + 1 < self.max_depth:
                            sub = self.workspace.open_subdir(fd, name)
                            if sub is not None:
                                children.append((sub, [*where, name], depth + 1))
                    stack.extend(reversed(children))
                finally:
                    os.close(fd)
        finally:
            while stack:
                os.close(stack.pop()[0])
        return out

    # -- search --------------------------------------------------------------------------------------
    def search_files(
        self,
        text: str,
        path: str = ".",
        pattern: str = "*",
        case_sensitive: bool = False,
    ) -> SearchResult:
        """Find the lines that contain a text, in the files below a workspace directory.

        A plain-text search (not a regular expression); binary files and files larger than the read
        limit are skipped and counted.

        Args:
            text: The text to look for.
            path: Directory to search in, relative to the workspace.
            pattern: Only files whose name matches this glob, e.g. '*.py'.
            case_sensitive: Match letter case exactly.
        """
        ws = self.workspace
        if not text:
            raise ws.error("text must not be empty.")
        if "\n" in text:
            raise ws.error("text must be on one line: the search matches line by line.")
        needle = text if case_sensitive else text.casefold()
        parts = ws.parts(path)
        matches: list[SearchMatch] = []
        searched = skipped = 0
        read_left = self.max_search_bytes
        truncated = False
        for rel, name, st in self._walk(parts, recursive=True, include_hidden=False):
            if kind_of(st.st_mode) != "file" or not fnmatch.fnmatchcase(name, pattern):
                continue
            if st.st_size > self.max_read_bytes:
                skipped += 1
                continue
            if st.st_size > read_left:  # the search has read all it may: the rest is not searched
                truncated = True
                break
            data = self._read_for_search(rel)
            if data is None or b"\x00" in data[:_BINARY_SNIFF]:
                skipped += 1
                continue
            read_left -= len(data)
            searched += 1
            lines = data.decode("utf-8", "replace").splitlines()
            for number, line in enumerate(lines, 1):
                if needle in (line if case_sensitive else line.casefold()):
                    if len(matches) >= self.max_search_matches:
                        truncated = True
                        break
                    matches.append({"path": rel, "line": number, "text": line[:_MAX_LINE_CHARS]})
            if truncated:
                break
        return {"matches": matches, "files_searched": searched, "files_skipped": skipped, "truncated": truncated}

    def _read_for_search(self, rel: str) -> bytes | None:
        try:
            fd, _ = self.workspace.open_file(rel.split("/"), os.O_RDONLY)
        except ToolError:
            return None  # changed since it was listed (now a symlink, removed): skip it
        try:
            return os.pread(fd, self.max_read_bytes, 0)
        finally:
            os.close(fd)


def _kind(mode: int) -> Literal["file", "directory", "symlink", "other"]:
    kind = kind_of(mode)
    assert kind in ("file", "directory", "symlink", "other")
    return kind  # type: ignore[return-value]


def _decode_utf8(data: bytes, *, final: bool) -> tuple[str | None, int]:
    """``(text, bytes used)``: a character cut at the end of ``data`` is left for the next read.

    ``text`` is None when ``data`` is not UTF-8; ``bytes used`` is then where the bad byte starts.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        text = decoder.decode(data, final=final)
    except UnicodeDecodeError as exc:
        return None, exc.start
    pending = len(decoder.getstate()[0])
    return text, len(data) - pending
