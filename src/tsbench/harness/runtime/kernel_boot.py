"""Code that runs on the sandbox's side of the wall, never in the host process.

It has two roles, and imports nothing from tsbench so that it works from a bare path:

* Run as a script, it is the first link of the kernel's launch command: it sets the
  resource limits (address space, tasks, file size, core dumps), inside a jail started by
  root drops from the namespace's root to the sandbox uid with every capability set emptied,
  and then `exec`s the rest of the command line, so all of it holds for the kernel and
  everything it forks.
* Loaded inside the started kernel (by a hidden cell the host sends), `boot()` fills the
  user namespace (numpy, scipy, `series`, `L`, `channels`, optionally `sub_rlm`), hooks
  figure capture and installs the in-process guards.

The guards are audit hooks (PEP 578), installed only in the weaker `--unsafe-sandbox` mode.
They stop ordinary Python code from writing outside the working directory, starting other
programs or (where no network namespace exists) opening network connections, but they are
not a jail: code that reaches for ctypes can step around them. The jail itself (bubblewrap:
namespaces, read-only root, tmpfs quotas) is built by the host in `jail.py`.
"""

from __future__ import annotations

import io
import json
import os
import resource
import socket
import sys
import warnings

SERIES_FILE = "series.npz"
SUB_RLM_PROMPT_PREFIX = "\x00tsbench-sub_rlm\x00"

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_PATH_CHANGING_EVENTS = {
    # event name -> positions of the path arguments it changes
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.rename": (0, 1),
    "os.link": (0, 1),
    "os.symlink": (1,),
    "os.truncate": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.utime": (0,),
    "os.chflags": (0,),
    "os.lchflags": (0,),
    "os.setxattr": (0,),
    "os.removexattr": (0,),
    "os.mkfifo": (0,),
    "os.mknod": (0,),
    "shutil.rmtree": (0,),
    "shutil.copyfile": (1,),
    "shutil.copytree": (1,),
    "shutil.move": (0, 1),
}
_ALWAYS_WRITABLE = {"/dev/null"}
_PROGRAM_STARTING_EVENTS = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn"}


# ---------------------------------------------------------------- launcher (script) --


def _apply_limits_and_exec(argv: list[str]) -> None:
    """Set rlimits given as `NAME=value` pairs (`uid=N`: drop to that uid), then become the
    command after `--`: `-m MODULE ARGS...` runs that module in this very process (one interpreter
    start less for every kernel), anything else is exec'd.

    Limits are set soft == hard, so code in the kernel cannot raise them again.
    """
    split = argv.index("--")
    settings, command = argv[:split], argv[split + 1 :]
    drop_to = None
    for setting in settings:
        name, value = setting.split("=", 1)
        if name == "uid":
            drop_to = int(value)
            continue
        limit = int(value)
        resource.setrlimit(getattr(resource, f"RLIMIT_{name.upper()}"), (limit, limit))
    if drop_to is not None and os.getuid() == 0:
        _drop_privileges(drop_to)
    if command[0] == "-m":
        import runpy

        if command[1] == "ipykernel_launcher":
            _without_fork_pipe()
            _without_debugger()
        sys.argv = [command[1], *command[2:]]
        runpy.run_module(command[1], run_name="__main__", alter_sys=True)
        return
    os.execvp(command[0], command)


def _without_fork_pipe() -> None:
    """Start ipykernel without its pipe for forked children's output: that pipe is a zmq socket bound
    to tcp://127.0.0.1, and zmq resolves a tcp bind address through getifaddrs(), i.e. a netlink socket,
    which the jail's seccomp filter refuses (zmq then aborts the kernel). Forked children's prints are
    dropped instead; their results (pipes, files, exit codes) are unaffected."""
    from ipykernel import iostream

    start_thread = iostream.IOPubThread.__init__

    def without_pipe(self, socket, pipe=False, session=False):
        start_thread(self, socket, pipe=False, session=session)

    iostream.IOPubThread.__init__ = without_pipe


def _without_debugger() -> None:
    """Start ipykernel without debugpy: its import is ~0.1 of the ~0.4 CPU-s a kernel takes to be ready
    (a quarter of every episode's kernel start, issue 47), and it serves only a front end's debug
    panel, which the host never opens. A None entry makes `import debugpy` fail, so ipykernel starts
    with its debugger off (kernel_info says `debugger: false`); a cell that imports debugpy fails too."""
    sys.modules["debugpy"] = None


def _drop_privileges(uid: int) -> None:
    """From the jail's root (which holds only CAP_SETUID, CAP_SETGID and CAP_SETPCAP) to `uid`,
    with the bounding, inheritable, permitted, effective and ambient sets all empty."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    pr_capbset_drop = 24
    for cap in range(64):
        if libc.prctl(pr_capbset_drop, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # EINVAL: no such cap
            raise OSError(ctypes.get_errno(), f"cannot drop capability {cap} from the bounding set")
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # clears the permitted, effective and ambient sets

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    header, data = Header(0x20080522, 0), (Data * 2)()  # _LINUX_CAPABILITY_VERSION_3, all zero
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "cannot clear the inheritable capabilities")
    if os.getuid() != uid or os.geteuid() != uid:
        raise OSError("the sandbox uid did not stick")


# ----------------------------------------------------------------- boot (in kernel) --


def boot(shell, config: dict) -> None:
    """Prepare a fresh kernel for an episode: data, helpers, figure hook, guards.

    `config` keys: workdir, capture_figures, max_figures, sub_rlm, guards (the audit hooks of
    the unsafe mode), network_guard. Guards go last so that the imports above them are not
    slowed by the hooks.
    """
    import numpy as np
    import scipy

    workdir = os.path.realpath(config["workdir"])
    os.chdir(workdir)
    series, channels = _load_series(np, os.path.join(workdir, SERIES_FILE))
    shell.user_ns.update(
        np=np,
        scipy=scipy,
        series=series,
        channels=channels,
        L=max((len(values) for values in series.values()), default=0),
    )
    if config.get("sub_rlm"):
        shell.user_ns["sub_rlm"] = _make_sub_rlm(shell)
    if config.get("capture_figures"):
        _hook_figure_capture(shell, int(config.get("max_figures", 2)))
    if config.get("network_guard"):
        sys.addaudithook(_network_guard)
    if config.get("guards"):
        sys.addaudithook(_make_filesystem_guard(workdir))
        sys.addaudithook(_program_guard)


def _load_series(np, path: str):
    """Read the series the host saved: arrays `c0..cN` plus their channel `names`."""
    with np.load(path, allow_pickle=False) as archive:
        channels = [str(name) for name in archive["names"]]
        series = {name: np.asarray(archive[f"c{index}"], dtype=np.float64) for index, name in enumerate(channels)}
    return series, channels


def _make_sub_rlm(shell):
    """Build `sub_rlm`, which asks the host (over the kernel's stdin channel) to run a
    nested episode. The stdin channel is a unix socket like the others, so it crosses
    the network namespace; the host answers it while it waits for the cell."""

    def sub_rlm(question: str, data: dict | None = None) -> str:
        """Ask a nested agent `question` about `data` (default: this episode's series);
        returns its final message as a string."""
        request = json.dumps({"question": str(question), "data": data}, default=_to_json)
        reply = json.loads(shell.kernel.raw_input(SUB_RLM_PROMPT_PREFIX + request))
        if "error" in reply:
            raise RuntimeError(f"sub_rlm failed: {reply['error']}")
        return reply["answer"]

    return sub_rlm


def _to_json(value):
    """JSON fallback for numpy values: arrays are tagged so the host rebuilds them."""
    if hasattr(value, "tolist") and hasattr(value, "shape"):
        if value.shape == ():
            return value.item()
        return {"__ndarray__": value.tolist()}
    raise TypeError(f"sub_rlm data must be JSON-serialisable or numpy, not {type(value).__name__}")


def _hook_figure_capture(shell, max_figures: int) -> None:
    """After every cell, send up to `max_figures` open matplotlib figures as PNG
    display data and close all figures, so each turn starts with a clean slate."""
    warnings.filterwarnings("ignore", message=".*non-interactive.*cannot be shown")

    def publish_open_figures(_result=None) -> None:
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is None:
            return
        from IPython.display import display

        figure_numbers = pyplot.get_fignums()
        for number in figure_numbers[:max_figures]:
            buffer = io.BytesIO()
            pyplot.figure(number).savefig(buffer, format="png", dpi=100, bbox_inches="tight")
            display({"image/png": buffer.getvalue()}, raw=True)
        skipped = len(figure_numbers) - max_figures
        if skipped > 0:
            print(f"[{skipped} more figure(s) not returned: at most {max_figures} per turn]")
        pyplot.close("all")

    shell.events.register("post_run_cell", publish_open_figures)


def _network_guard(event: str, args: tuple) -> None:
    """Refuse outbound traffic on anything but unix sockets (used where no network
    namespace is available)."""
    if event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
        sock = args[0]
        if getattr(sock, "family", None) != socket.AF_UNIX:
            raise PermissionError("outbound network access is disabled in this sandbox")


def _program_guard(event: str, args: tuple) -> None:
    """Refuse starting other programs (shells, `!cmd`): they would step outside the
    audit hooks, e.g. to write into world-writable places like /tmp. Forking stays
    allowed (a forked child keeps these hooks) and is bounded by RLIMIT_NPROC."""
    if event in _PROGRAM_STARTING_EVENTS:
        raise PermissionError("starting other programs is not allowed in this sandbox")


def _make_filesystem_guard(workdir: str):
    """Refuse file writes, deletions and renames outside `workdir`."""
    allowed_prefix = workdir.rstrip(os.sep) + os.sep

    def is_inside(path) -> bool:
        if isinstance(path, int):  # an already-open descriptor: nothing new is reached
            return True
        resolved = os.path.realpath(os.fsdecode(path))
        return resolved == workdir or resolved.startswith(allowed_prefix) or resolved in _ALWAYS_WRITABLE

    def refuse(path) -> None:
        raise PermissionError(f"writing outside the working directory is not allowed: {path!r}")

    def guard(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = args
            writes = any(ch in mode for ch in "wax+") if isinstance(mode, str) else bool((flags or 0) & _WRITE_FLAGS)
            if writes and path is not None and not is_inside(path):
                refuse(path)
            return
        positions = _PATH_CHANGING_EVENTS.get(event)
        if positions is None:
            return
        for position in positions:
            path = args[position] if position < len(args) else None
            if path is not None and not is_inside(path):
                refuse(path)

    return guard


if __name__ == "__main__":
    _apply_limits_and_exec(sys.argv[1:])
