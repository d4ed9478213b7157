"""Restore targets on a freshly made, journaled ext4 filesystem (a loop device over a sparse file).

Why: ext4 without a journal (the root filesystem of some VMs, this machine's included) skips
inodes deleted in the last 60-360 s when it allocates new ones, scanning each inode-table block
it has cached. A restore that starts seconds after the previous one's tree was removed pays for
that scan on every file it creates, more so when several threads create files at once: on the
100,000-file set it doubled to tripled the system time of every parallel restorer, and varied
from run to run with what was deleted before. Users restore onto journaled filesystems (ext4's
default, XFS, btrfs), where the check does not exist. So by default every restore target and the
tar/cp references live on their own journaled ext4, made once per bench run.
"""

from __future__ import annotations

import os
import shutil
import subprocess


class TargetFs:
    """A mounted loop filesystem at `mountpoint`; `close()` unmounts it and removes the image."""

    def __init__(self, mountpoint: str, image: str, device: str, description: str):
        self.mountpoint = mountpoint
        self.image = image
        self.device = device
        self.description = description

    def trim(self) -> None:
        """Returns the blocks of deleted files to the image's filesystem (`fstrim`, which the
        loop device turns into holes punched in the image). Without it the image keeps every
        block any restore ever wrote, and a run of many restores fills bench/out's disk."""
        subprocess.run(["fstrim", self.mountpoint], check=False, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=120)

    def close(self) -> None:
        subprocess.run(["umount", self.mountpoint], check=False, stderr=subprocess.DEVNULL)
        if os.path.ismount(self.mountpoint):
            subprocess.run(["umount", "-l", self.mountpoint], check=False, stderr=subprocess.DEVNULL)
        subprocess.run(["losetup", "-d", self.device], check=False, stderr=subprocess.DEVNULL)
        try:
            os.unlink(self.image)
        except OSError:
            pass


def release_stale(mountpoint: str) -> None:
    """Unmounts what a killed earlier run left mounted at `mountpoint`."""
    if os.path.ismount(mountpoint):
        dev = None
        with open("/proc/self/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 1 and parts[1] == mountpoint:
                    dev = parts[0]
        subprocess.run(["umount", "-l", mountpoint], check=False, stderr=subprocess.DEVNULL)
        if dev and dev.startswith("/dev/loop"):
            subprocess.run(["losetup", "-d", dev], check=False, stderr=subprocess.DEVNULL)


def _run(argv) -> str | None:
    """None on success, else the failure in one line."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{argv[0]}: {e}"
    if p.returncode != 0:
        return f"{' '.join(argv)}: exit {p.returncode}: {(p.stderr or p.stdout).strip()[:200]}"
    return None


def make_ext4(mountpoint: str, image: str, size_bytes: int) -> tuple[TargetFs | None, str]:
    """Makes and mounts the filesystem; returns (fs, "") or (None, why not)."""
    if os.geteuid() != 0:
        return None, "not root (mount and losetup need it)"
    for tool in ("mkfs.ext4", "losetup", "mount", "umount"):
        if not shutil.which(tool):
            return None, f"{tool} not found (apt-get install e2fsprogs mount)"
    release_stale(mountpoint)
    os.makedirs(mountpoint, exist_ok=True)
    try:
        if os.path.exists(image):
            os.unlink(image)
        with open(image, "wb") as f:
            f.truncate(size_bytes)
    except OSError as e:
        return None, f"cannot create {image}: {e}"
    # Inode tables and journal written now, so no lazy-init thread runs during measurements.
    err = _run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", image])
    if err:
        os.unlink(image)
        return None, err
    try:
        p = subprocess.run(["losetup", "--direct-io=on", "-f", "--show", image],
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        os.unlink(image)
        return None, f"losetup: {e}"
    device = p.stdout.strip()
    if p.returncode != 0 or not device:
        os.unlink(image)
        return None, f"losetup: {p.stderr.strip()[:200]}"
    err = _run(["mount", device, mountpoint])
    if err:
        subprocess.run(["losetup", "-d", device], check=False)
        os.unlink(image)
        return None, err
    gib = size_bytes / 2**30
    desc = (f"ext4 with journal (fresh mkfs.ext4 defaults), {gib:.0f} GiB sparse image on "
            f"{device} (direct I/O) over bench/out")
    return TargetFs(mountpoint, image, device, desc), ""
