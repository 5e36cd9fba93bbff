"""The files of a compaction pass in a partition directory: their names, the commit of a cleaned group
(`commit_swap`, steps 3a-c of the pass herd.log.compaction describes) and the recovery after a crash among them
(`recover`, step 4).

`SegmentLog.open` runs `recover` before it lists the segments, and herd.log.compaction writes and commits the
files, so both import this module and the log never imports the compactor.
"""

from __future__ import annotations

import posixpath

from herd.log.fs import FileSystem
from herd.log.segment import segment_name

SUFFIXES = (".index", ".timeindex", ".log", ".txnindex")  # committed in this order; `.txnindex` is optional
_OLD_SUFFIXES = ("log", "index", "timeindex", "txnindex")  # the files of a segment a swap replaces
CLEANED = ".cleaned"  # written by a pass, not committed: removed by recovery
SWAP = ".swap"  # `<base>.log.swap` etc.: data of a pass, committed once its manifest is renamed
MANIFEST = ".swap"  # `<base>.swap` (no other dot): a committed swap, holding the group's end offset


def segment_file(directory: str, base: int, suffix: str) -> str:
    """The path of the segment file of base offset `base` ending with `suffix` (".log", ".index.cleaned", ...)."""
    return posixpath.join(directory, segment_name(base) + suffix)


def commit_swap(fs: FileSystem, directory: str, base: int, end: int) -> None:
    """Commit the cleaned files of the group [base, end) and swap them in for the segments they replace. The
    group's `.txnindex` (aborted transactions, herd.log.transactions) exists only if one of the replaced segments
    had one; it goes through the same steps as the others."""
    for suffix in SUFFIXES:
        cleaned = segment_file(directory, base, suffix + CLEANED)
        if suffix != ".txnindex" or fs.exists(cleaned):
            fs.rename(cleaned, segment_file(directory, base, suffix + SWAP))
    fs.fsync_dir(directory)
    fs.rename(segment_file(directory, base, MANIFEST + CLEANED), segment_file(directory, base, MANIFEST))
    fs.fsync_dir(directory)  # committed: from here on a crash finishes the swap
    _finish_swap(fs, directory, base, end, fs.listdir(directory))


def _finish_swap(fs: FileSystem, directory: str, base: int, end: int, names: list[str]) -> None:
    """The steps after the commit point; idempotent, so recovery can run them again after a crash inside them.

    The old segments' files go first (the group's first segment's only while its new `.log` is still to be
    renamed: that rename is what says they are gone), then the new files get their names, the log file before
    the transaction index: a crash after the log's rename leaves `<base>.txnindex.swap` to be renamed by the
    recovery, never an old `<base>.txnindex` taken for the new one (nor a new one removed as old). Without this
    the recovery after a crash here left the replaced segments' `.txnindex` files without their `.log` and the
    log's open deleted them as strays, losing their aborted transactions."""
    new_log_pending = fs.exists(segment_file(directory, base, ".log" + SWAP))
    for name in names:
        stem, _, suffix = name.partition(".")
        if suffix in _OLD_SUFFIXES and len(stem) == 20 and stem.isdigit():
            old = int(stem)
            if base < old < end or (old == base and new_log_pending):
                fs.remove(posixpath.join(directory, name))
    fs.fsync_dir(directory)
    for suffix in SUFFIXES:
        swapped = segment_file(directory, base, suffix + SWAP)
        if fs.exists(swapped):
            fs.rename(swapped, segment_file(directory, base, suffix))
    fs.fsync_dir(directory)
    fs.remove(segment_file(directory, base, MANIFEST))
    fs.fsync_dir(directory)


def recover(fs: FileSystem, directory: str) -> None:
    """Finish every committed swap and remove what uncommitted passes left."""
    names = fs.listdir(directory)
    remove_leftovers(fs, directory, (CLEANED,), names)
    names = fs.listdir(directory)
    for name in names:
        stem, _, suffix = name.partition(".")
        if suffix == MANIFEST[1:] and len(stem) == 20 and stem.isdigit():
            end = _read_manifest(fs, posixpath.join(directory, name))
            _finish_swap(fs, directory, int(stem), end, fs.listdir(directory))
    remove_leftovers(fs, directory, (SWAP,))


def remove_leftovers(fs: FileSystem, directory: str, endings: tuple[str, ...], names: list[str] | None = None) -> None:
    """Remove the files ending with `endings` (other than manifests, which only `recover` finishes)."""
    for name in names if names is not None else fs.listdir(directory):
        stem, _, suffix = name.partition(".")
        if suffix == MANIFEST[1:]:
            continue
        if name.endswith(endings) and fs.exists(posixpath.join(directory, name)):
            fs.remove(posixpath.join(directory, name))


def _read_manifest(fs: FileSystem, path: str) -> int:
    f = fs.open(path, "r")
    try:
        return int(f.pread(0, 64).strip())
    finally:
        f.close()
