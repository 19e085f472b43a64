"""Three conclave nodes in one Python program through ctypes (EMB-3), the flow of
three_nodes.c: one leader, seen by IsLeader on exactly one node and by GetCurrentLeader on
all; SetLeader moves leadership; ConclaveStop of the leader hands over and the other nodes'
leader-changed callbacks report a new leader in a higher term. The callbacks call back into
the library. Misuse is an error code with a message.

usage: python3 three_nodes.py LIBCONCLAVE.so ID_A A.toml ID_B B.toml ID_C C.toml
"""

import ctypes
import sys
import threading
import time

PATIENCE_S = 30.0

# From include/conclave.h.
CONCLAVE_OK = 0
CONCLAVE_ERR_INVALID_ARGUMENT = -1
CONCLAVE_ERR_INVALID_HANDLE = -2
CONCLAVE_ERR_CONFIG = -3
CONCLAVE_ERR_STOPPED = -5
CONCLAVE_ERR_BUFFER_TOO_SMALL = -7
CONCLAVE_ROLE_LEADER = 2
CONCLAVE_PEER_CONNECTED = 1
CONCLAVE_PEER_ID_SIZE = 36

ConclaveHandle = ctypes.c_uint64


class ConclavePeer(ctypes.Structure):
    _fields_ = [
        ("id", ctypes.c_char * CONCLAVE_PEER_ID_SIZE),
        ("status", ctypes.c_int32),
        ("rtt_us", ctypes.c_int64),
    ]


LeaderChangedCallback = ctypes.CFUNCTYPE(
    None, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_int32, ctypes.c_void_p
)
PeerStatusCallback = ctypes.CFUNCTYPE(
    None, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p
)


def load(path):
    lib = ctypes.CDLL(path)
    signatures = {
        "ConclaveStart": [ctypes.c_char_p, ctypes.POINTER(ConclaveHandle)],
        "ConclaveStop": [ConclaveHandle],
        "SetLeader": [ConclaveHandle, ctypes.c_char_p],
        "EnableAutoLeaderElection": [ConclaveHandle, ctypes.c_bool],
        "GetCurrentLeader": [
            ConclaveHandle,
            ctypes.c_char_p,
            ctypes.c_size_t,
            ctypes.POINTER(ctypes.c_uint64),
        ],
        "IsLeader": [ConclaveHandle],
        "GetPeerList": [
            ConclaveHandle,
            ctypes.POINTER(ConclavePeer),
            ctypes.c_size_t,
            ctypes.POINTER(ctypes.c_size_t),
        ],
        "RegisterPeerStatusCallback": [ConclaveHandle, PeerStatusCallback, ctypes.c_void_p],
        "RegisterLeaderChangedCallback": [
            ConclaveHandle,
            LeaderChangedCallback,
            ctypes.c_void_p,
        ],
        "ConclaveLastError": [ctypes.c_char_p, ctypes.c_size_t],
    }
    for name, argtypes in signatures.items():
        function = getattr(lib, name)
        function.argtypes = argtypes
        function.restype = ctypes.c_int32
    return lib


def check(condition, message):
    if not condition:
        raise SystemExit(f"check failed: {message}")


def wait_until(what, probe):
    deadline = time.monotonic() + PATIENCE_S
    while True:
        value = probe()
        if value is not None and value is not False:
            return value
        check(time.monotonic() < deadline, f"never saw {what}")
        time.sleep(0.02)


class Node:
    """One node and what its callbacks saw (written on the callback thread)."""

    def __init__(self, lib, node_id, toml):
        self.lib = lib
        self.id = node_id
        self.handle = ConclaveHandle(0)
        self.lock = threading.Lock()
        self.leader_events = []
        self.peer_events = 0
        self.reentrant_answers = 0
        self.reentrant_failures = 0
        status = lib.ConclaveStart(toml.encode(), ctypes.byref(self.handle))
        check(status == CONCLAVE_OK, f"start {node_id}: {last_error(lib)}")
        # ctypes must keep the callback objects alive as long as the library may call them.
        self._on_leader = LeaderChangedCallback(self.on_leader_changed)
        self._on_peer = PeerStatusCallback(self.on_peer_status)
        check(
            lib.RegisterLeaderChangedCallback(self.handle, self._on_leader, None) == CONCLAVE_OK,
            last_error(lib),
        )
        check(
            lib.RegisterPeerStatusCallback(self.handle, self._on_peer, None) == CONCLAVE_OK,
            last_error(lib),
        )

    def on_leader_changed(self, leader, term, role, _user_data):
        leads = self.lib.IsLeader(self.handle)  # re-entrant call from the callback thread
        with self.lock:
            if leads in (0, 1):
                self.reentrant_answers += 1
            elif leads not in (CONCLAVE_ERR_STOPPED, CONCLAVE_ERR_INVALID_HANDLE):
                self.reentrant_failures += 1
            self.leader_events.append((leader.decode(), term, role))

    def on_peer_status(self, peer_id, _old, _new, _user_data):
        with self.lock:
            self.peer_events += 1

    def current_leader(self):
        name = ctypes.create_string_buffer(CONCLAVE_PEER_ID_SIZE)
        term = ctypes.c_uint64(0)
        status = self.lib.GetCurrentLeader(self.handle, name, len(name), ctypes.byref(term))
        check(status == CONCLAVE_OK, last_error(self.lib))
        return name.value.decode(), term.value

    def is_leader(self):
        leads = self.lib.IsLeader(self.handle)
        check(leads in (0, 1), f"IsLeader {leads}: {last_error(self.lib)}")
        return leads == 1

    def saw_leader(self, wanted, above):
        """The term of a leader-changed callback naming `wanted` (any leader when None) in a
        term above `above`, or None."""
        with self.lock:
            events = list(self.leader_events)
        for leader, term, _role in events:
            if leader and (wanted is None or leader == wanted) and term > above:
                return term
        return None


def last_error(lib):
    message = ctypes.create_string_buffer(1024)
    lib.ConclaveLastError(message, len(message))
    return message.value.decode()


def agreed_leader(nodes):
    views = [node.current_leader() for node in nodes]
    names = {name for name, _ in views}
    if len(names) != 1 or "" in names:
        return None
    leading = [node for node in nodes if node.is_leader()]
    if len(leading) != 1 or leading[0].id != views[0][0]:
        return None
    return leading[0], views[0][1]


def check_misuse(lib, node):
    check(lib.IsLeader(0) == CONCLAVE_ERR_INVALID_HANDLE, "a zero handle")
    check("handle 0" in last_error(lib), last_error(lib))
    check(lib.IsLeader(987654321) == CONCLAVE_ERR_INVALID_HANDLE, "an unknown handle")
    check(
        lib.SetLeader(node.handle, b"not a valid id!") == CONCLAVE_ERR_INVALID_ARGUMENT,
        "a bad peer id",
    )
    handle = ConclaveHandle(0)
    check(
        lib.ConclaveStart(b'[election]\nmode = "paxos"\n', ctypes.byref(handle))
        == CONCLAVE_ERR_CONFIG,
        "a bad election mode",
    )
    check("election.mode" in last_error(lib), last_error(lib))
    small = ctypes.create_string_buffer(4)
    check(
        lib.ConclaveLastError(small, len(small)) == CONCLAVE_ERR_BUFFER_TOO_SMALL,
        "a short buffer",
    )
    check(len(small.value) == 3, "a truncated message is NUL-terminated")


def main():
    check(len(sys.argv) == 8, __doc__)
    lib = load(sys.argv[1])
    nodes = []
    for i in range(3):
        node_id, path = sys.argv[2 + 2 * i], sys.argv[3 + 2 * i]
        with open(path, encoding="utf-8") as config:
            nodes.append(Node(lib, node_id, config.read()))

    leader, term = wait_until("one leader agreed by all three", lambda: agreed_leader(nodes))
    print(f"leader {leader.id} in term {term}")
    wait_until("the leader's own callback", lambda: leader.saw_leader(leader.id, 0))
    peers = (ConclavePeer * 3)()
    count = ctypes.c_size_t(0)
    check(
        lib.GetPeerList(leader.handle, peers, len(peers), ctypes.byref(count)) == CONCLAVE_OK,
        last_error(lib),
    )
    check(count.value == 2, f"the leader has {count.value} peers")
    for peer in peers[: count.value]:
        check(peer.status == CONCLAVE_PEER_CONNECTED, f"{peer.id} is {peer.status}")
    check_misuse(lib, leader)

    target = nodes[(nodes.index(leader) + 1) % 3]
    check(lib.SetLeader(leader.handle, target.id.encode()) == CONCLAVE_OK, last_error(lib))
    moved_term = wait_until(
        "SetLeader moving leadership",
        lambda: target.is_leader() and target.saw_leader(target.id, term),
    )
    print(f"set_leader moved leadership to {target.id} in term {moved_term}")

    check(lib.ConclaveStop(target.handle) == CONCLAVE_OK, last_error(lib))
    check(lib.IsLeader(target.handle) == CONCLAVE_ERR_INVALID_HANDLE, "a stopped handle")
    survivors = [node for node in nodes if node is not target]
    for node in survivors:
        wait_until(
            f"{node.id} hearing of a successor",
            lambda node=node: node.saw_leader(None, moved_term),
        )
    successor, final_term = wait_until("the survivors agreeing", lambda: agreed_leader(survivors))
    check(successor is not target and final_term > moved_term, f"{successor.id} {final_term}")
    print(f"after the stop, {successor.id} leads in term {final_term}")

    for node in survivors:
        check(lib.ConclaveStop(node.handle) == CONCLAVE_OK, last_error(lib))
    for node in nodes:
        check(node.reentrant_failures == 0, f"{node.id}: IsLeader failed inside a callback")
        check(node.reentrant_answers > 0, f"{node.id}: IsLeader never answered in a callback")
        check(node.peer_events > 0, f"{node.id}: no peer status callback")
        terms = [term for _, term, _ in node.leader_events]
        check(terms == sorted(terms), f"{node.id}: leader events out of order: {terms}")
    print("ok")


if __name__ == "__main__":
    main()
