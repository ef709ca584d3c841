"""What the disk under a benchmark costs: the kernel's profile of a whole command (perf), and a journaled ext4 made on
this machine's disk to run the same command against (for bench/import_run.py).

This machine's root file system is ext4 without a journal (the kernel then calls `recently_deleted` from
`find_inode_bit` for every inode it allocates, and passes over each inode freed in the last half minute whose table
block is not yet written back). Making many files soon after many were deleted, as a blob store does, then costs the
kernel far more than on a journaled ext4, where that check is never made. Both are measured, not assumed: `perf`
counts where the kernel's time goes, and the journaled file system is a real ext4 (mkfs.ext4's defaults, journal
included) in an image file on the same disk, loop-mounted.

Writing the bytes costs the kernel more on some virtual machines than others: where the host takes back the guest's
free memory (virtio-balloon's free page reporting, as on this machine), a page the page cache takes that the host
took back is faulted in and zeroed by the host inside the kernel's copy (copy_folio_from_iter_atomic,
clear_page_erms). `free_page_reporting()` says whether this machine does it. Some also page out, in the guest,
memory nobody touched for a while (the kernel's DAMON with a `pageout` scheme, run by kdamond): a file read or
written a minute before (a benchmark's corpus, Python's modules at a process's start, PostgreSQL's tables) is read
from the disk again. `proactive_reclaim()` says whether this machine does it, and after how long.

Both need root and the tools (perf: Debian's linux-perf; mkfs.ext4, mount, a loop device); without them each says
why and the benchmark goes on without the figure.
"""
from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# The kernel functions whose share (with what they call) says what making a file cost (ext4's inode allocation).
KERNEL_MARKS = ("__ext4_new_inode", "recently_deleted")


def perf_prefix(out: Path) -> list[str] | str:
    """The words that run a command (and the processes it starts) under `perf record` (CPU clock, call graphs) into
    `out`; or why it cannot."""
    perf = shutil.which("perf")
    if perf is None:
        return "perf is not installed (apt-get install linux-perf)"
    probe = subprocess.run([perf, "record", "-q", "-e", "cpu-clock", "-o", "/dev/null", "--", "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return f"perf cannot record here ({probe.stderr.strip()[:200]})"
    return [perf, "record", "-q", "-e", "cpu-clock", "-F", "2000", "-g", "-o", str(out), "--"]


def _report(data: Path, *args: str) -> list[str]:
    result = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "-g", "none", *args], capture_output=True,
                            text=True)
    return [line for line in result.stdout.splitlines() if line.strip() and not line.startswith("#")]


def _share(line: str) -> float:
    return float(line.split()[0].rstrip("%"))


def kernel_summary(data: Path, *, top: int = 6) -> list[str]:
    """Lines saying the kernel's share of the recorded CPU, the share under each of KERNEL_MARKS (with what they
    call), and the kernel functions with the most samples of their own."""
    kernel = sum(_share(line) for line in _report(data, "--no-children", "--sort", "dso") if "[kernel" in line)
    inclusive = {line.split()[-1]: _share(line) for line in _report(data, "--children", "--sort", "sym")
                 if line.split()[-1] in KERNEL_MARKS}
    own = [line for line in _report(data, "--no-children", "--sort", "sym") if "[k]" in line][:top]
    marks = ", ".join(f"{name} {inclusive.get(name, 0.0):.1f}%" for name in KERNEL_MARKS)
    return [f"the kernel: {kernel:.1f}% of the CPU samples; under {marks} (with what they call)",
            "  the kernel's own most sampled: " + "; ".join(
                f"{line.split()[-1]} {_share(line):.1f}%" for line in own)]


@contextmanager
def journaled_ext4(image: Path, mount_point: Path, *, size_gb: int = 4) -> Iterator[Path | str]:
    """A fresh ext4 with a journal (mkfs.ext4's defaults) in the sparse file `image`, loop-mounted at `mount_point`
    for the block; yields the mount point, or why it could not be made (then nothing is left mounted)."""
    image.parent.mkdir(parents=True, exist_ok=True)
    mount_point.mkdir(parents=True, exist_ok=True)
    with image.open("wb") as sparse:
        sparse.truncate(size_gb << 30)
    steps = [["mkfs.ext4", "-q", "-F", str(image)], ["mount", "-o", "loop", str(image), str(mount_point)]]
    for step in steps:
        try:
            done = subprocess.run(step, capture_output=True, text=True)
        except OSError as exc:
            done = subprocess.CompletedProcess(step, 1, "", str(exc))
        if done.returncode != 0:
            image.unlink(missing_ok=True)
            yield f"`{' '.join(step[:2])}` failed: {(done.stderr or done.stdout).strip()[:200]}"
            return
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=False)
        image.unlink(missing_ok=True)


def file_system(folder: Path) -> str:
    """The file system holding `folder`, and for an ext4 whether it journals (its mount options do not say; the
    kernel's /sys/fs/ext4/DEVICE/journal_task names the journal's thread, or `<none>`)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    probe = subprocess.run(["findmnt", "-n", "-o", "SOURCE,FSTYPE", "--target", str(folder)], capture_output=True,
                           text=True)
    source, fstype = ([*probe.stdout.split("\n")[0].split(), "?", "unknown"])[:2]
    if fstype != "ext4":
        return f"{fstype} ({source or '?'})"
    try:
        task = Path(f"/sys/fs/ext4/{Path(source).name}/journal_task").read_text().strip()
    except OSError:
        return f"ext4 ({source}; whether it journals: unknown)"
    return f"ext4 {'without' if task == '<none>' else 'with'} a journal ({source})"


VIRTIO_BALLOON = "0x0005"  # the virtio device id of a memory balloon
BALLOON_F_REPORTING = 5  # its feature bit: free page reporting


def free_page_reporting() -> str:
    """Whether this machine's free memory goes back to its host (a virtio balloon with free page reporting): the
    features string in sysfs has a character per feature bit, from bit 0."""
    for device in Path("/sys/bus/virtio/devices").glob("*"):
        try:
            if (device / "device").read_text().strip() != VIRTIO_BALLOON:
                continue
            features = (device / "features").read_text().strip()
        except OSError:
            continue
        reporting = len(features) > BALLOON_F_REPORTING and features[BALLOON_F_REPORTING] == "1"
        return "free pages reported to the host (virtio-balloon)" if reporting else "a virtio balloon, no reporting"
    return "no virtio balloon"


DAMON_ADMIN = Path("/sys/kernel/mm/damon/admin/kdamonds")


def _read(path: Path) -> str:
    return path.read_text().strip()


def _pageout_scheme(context: Path) -> str | None:
    """What a DAMON context's pageout scheme pages out: memory idle for at least its minimum age (counted in the
    context's aggregation intervals), at most its quota of bytes in its quota's interval."""
    aggregation_s = int(_read(context / "monitoring_attrs" / "intervals" / "aggr_us")) / 1e6
    for scheme in sorted(context.glob("schemes/[0-9]*")):
        if _read(scheme / "action") != "pageout":
            continue
        idle = int(_read(scheme / "access_pattern" / "age" / "min")) * aggregation_s
        quota, every = int(_read(scheme / "quotas" / "bytes")), int(_read(scheme / "quotas" / "reset_interval_ms"))
        rate = f", up to {quota / 2**20:.0f} MB every {every / 1000:g} s" if quota and every else ""
        return f"memory idle {idle:g} s paged out (DAMON{rate})"
    return None


def proactive_reclaim() -> str:
    """Whether this machine pages out memory that sat idle (a running kdamond with a pageout scheme), and after how
    long; what it could not read says so."""
    try:
        for kdamond in sorted(DAMON_ADMIN.glob("[0-9]*")):
            if _read(kdamond / "state") != "on":
                continue
            for context in sorted(kdamond.glob("contexts/[0-9]*")):
                scheme = _pageout_scheme(context)
                if scheme:
                    return scheme
    except (OSError, ValueError) as exc:
        return f"proactive reclaim unknown ({exc})"
    return "no proactive reclaim"


def machine_memory() -> str:
    """What this machine does with memory that a benchmark's figures depend on, in a few words."""
    return f"{free_page_reporting()}; {proactive_reclaim()}"
