"""The zygote: a warm, idle process that forks the sandboxed children, so the fork server never forks per program.

Why a separate process: after a fork, every page the parent writes to is copied (copy-on-write) while the child
lives. The fork server does real work per program (decoding, compiling, supervising), so forking from it cost
hundreds of page copies per program. The zygote, forked once from the warm server, only receives "fork a spare
for this directory, with these pipes" (the file descriptors travel over a unix socket), forks, reports the pid,
and later reaps the child and reports how it ended. It touches a handful of pages per program.

Standard library only (see :mod:`confine`).
"""

from __future__ import annotations

import contextlib
import marshal
import os
import select
import socket
import sys

try:
    from . import child
    from . import confine as _confine
except ImportError:
    import child  # type: ignore[no-redef]
    import confine as _confine  # type: ignore[no-redef]


class Zygote:
    """The fork server's handle on its zygote."""

    def __init__(self, guard: child.Guard) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        self.pid = os.fork()
        if self.pid == 0:
            ours.close()
            _serve(theirs, guard)
        theirs.close()
        self.sock = ours
        self._exits: dict[int, tuple[int, float]] = {}

    def fork(self, workdir: str, control: int, out: int, err: int) -> int:
        """A new child, confined to ``workdir``, reading its program from ``control``; returns its pid."""
        socket.send_fds(self.sock, [workdir.encode()], [control, out, err])
        while True:
            message = self._receive()
            if message[0] == "pid":
                return message[1]

    def reap(self, pid: int) -> tuple[int, float]:
        """Wait until ``pid`` has ended; its wait status and CPU seconds."""
        while pid not in self._exits:
            self._receive()
        return self._exits.pop(pid)

    def _receive(self) -> tuple:
        data = self.sock.recv(256)
        if not data:
            raise EOFError("the zygote died")
        message = marshal.loads(data)
        if message[0] == "exit":
            self._exits[message[1]] = (message[2], message[3])
        return message

    def close(self) -> None:
        self.sock.close()  # EOF: the zygote exits, its children get SIGKILL (parent-death signal)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def _serve(sock: socket.socket, guard: child.Guard) -> None:
    """The zygote's loop; never returns."""
    _confine.die_with_parent()
    live: dict[int, int] = {}  # pidfd -> pid
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    while True:
        for fd, _ in poller.poll():
            if fd != sock.fileno():
                pid = live.pop(fd)
                poller.unregister(fd)
                os.close(fd)
                _, status, usage = os.wait4(pid, 0)
                sock.send(marshal.dumps(("exit", pid, status, usage.ru_utime + usage.ru_stime)))
                continue
            message, fds, _, _ = socket.recv_fds(sock, 4096, 3)
            if not message:
                os._exit(0)  # the server is gone
            workdir = message.decode()
            child.set_workdir_env(workdir)  # before forking: the child then has nothing to copy for it
            pid = os.fork()
            if pid == 0:
                _become_spare(fds, workdir, guard)
            for received in fds:
                os.close(received)
            pidfd = os.pidfd_open(pid)
            live[pidfd] = pid
            poller.register(pidfd, select.POLLIN)
            sock.send(marshal.dumps(("pid", pid)))


def _become_spare(fds: list[int], workdir: str, guard: child.Guard) -> None:
    control, out, err = fds
    try:
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.dup2(control, 3)
        os.closerange(4, 65536)  # the socket, the pidfds and everything else of the zygote
    except BaseException:
        os._exit(child.EXIT_SETUP)
    child.serve_spare(3, workdir, guard)
