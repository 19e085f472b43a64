/*
 * conclave.h - the C ABI of conclave, a leader-election node inside a program.
 *
 * Written by crates/ffi/src/header.rs from the Rust definitions; do not edit by hand.
 * Regenerate: CONCLAVE_WRITE_HEADER=1 cargo test -p conclave-ffi header
 *
 * Build the library with cargo build --profile release-ffi -p conclave-ffi, which writes
 * target/release-ffi/libconclave.so, libconclave.a and conclave.pc; then, with
 * PKG_CONFIG_PATH=target/release-ffi, cc app.c $(pkg-config --cflags --libs conclave)
 * (pkg-config --static --libs for the static library's system libraries).
 * docs/embedding.md walks through a whole program in C, Python and C#.
 *
 * Rules
 *
 * - Status codes. Every function returns int32_t: CONCLAVE_OK (0) on success (IsLeader: 1
 *   or 0), a negative CONCLAVE_ERR_* code on failure. ConclaveLastError then gives the
 *   message of the last call that failed on the calling thread.
 * - Handles. ConclaveStart gives a handle; every other function takes it. A handle of 0, an
 *   unknown one, and one already passed to ConclaveStop are refused with
 *   CONCLAVE_ERR_INVALID_HANDLE; handles are never reused. Any thread may call any
 *   function, concurrently.
 * - Strings passed in are copied before the call returns and must be NUL-terminated UTF-8.
 *   Strings passed out are written into the caller's buffer, always NUL-terminated; a
 *   buffer too small gets what fits and CONCLAVE_ERR_BUFFER_TOO_SMALL.
 * - Callbacks. Each node has one callback thread, created by ConclaveStart, which calls the
 *   registered callbacks one at a time, in the order the node published the events. A
 *   callback reports the changes from its registration on: read the state as it is then
 *   with GetCurrentLeader, IsLeader and GetPeerList after registering. A
 *   callback may call any function of this header, on any node, its own included
 *   (ConclaveStop from a callback returns without waiting for the callback thread). A slow
 *   callback delays the next ones, never the node; if the callbacks fall more than 256
 *   events behind, the oldest are dropped and the current state is passed on instead: the
 *   leader-changed callback with the current leader and term, and the peer-status callback
 *   for every peer with old_status equal to new_status. Strings passed to a callback are
 *   valid until it returns. user_data is passed back untouched, on the callback thread.
 *   Callbacks must return normally (no longjmp, no exception through the library).
 * - Fencing. A leader may be deposed at any moment. (term, leader) from GetCurrentLeader
 *   or the leader-changed callback is the fencing token: whatever the leader drives should
 *   remember the highest term it has seen and refuse commands stamped with a lower one.
 * - No panic crosses the boundary: a defect inside the library is returned as
 *   CONCLAVE_ERR_INTERNAL with a message. That takes a library built to unwind, as the
 *   release-ffi profile and debug builds are; one built with cargo build --release aborts
 *   instead (its build warns so): a defect then ends the whole program at once.
 */

#ifndef CONCLAVE_H
#define CONCLAVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. */
/* Success. */
#define CONCLAVE_OK 0
/* A pointer argument is NULL, a string is not UTF-8, or a peer id breaks the id rules. */
#define CONCLAVE_ERR_INVALID_ARGUMENT -1
/* The handle is 0, unknown, or its node was stopped with ConclaveStop. */
#define CONCLAVE_ERR_INVALID_HANDLE -2
/* The configuration is not TOML or was refused; the message lists every problem by key. */
#define CONCLAVE_ERR_CONFIG -3
/* The node could not start: a port in use, a data directory another node holds, ... */
#define CONCLAVE_ERR_START -4
/* The node has halted (its WAL failed) or is stopping. */
#define CONCLAVE_ERR_STOPPED -5
/* The node refused: an election command (unknown peer, ...) or a lock (no log, not the leader). */
#define CONCLAVE_ERR_REFUSED -6
/* The caller's buffer is too small; what fits was written, NUL-terminated. */
#define CONCLAVE_ERR_BUFFER_TOO_SMALL -7
/* A defect inside the library (a caught panic); the message says where. */
#define CONCLAVE_ERR_INTERNAL -8
/* ConclaveLock: another still held the lock when timeout_ms ran out. */
#define CONCLAVE_ERR_TIMEOUT -9
/* ConclaveUnlock: the handle holds no lock of that name, or it was lost (its session ended). */
#define CONCLAVE_ERR_NOT_HELD -10

/* Roles (the leader-changed callback's role). */
/* Follows a leader or waits for one. */
#define CONCLAVE_ROLE_FOLLOWER 0
/* Campaigns to lead. */
#define CONCLAVE_ROLE_CANDIDATE 1
/* Leads. */
#define CONCLAVE_ROLE_LEADER 2

/* Peer statuses (ConclavePeer.status and the peer-status callback). */
/* Not in the peer table (as old status: it joined; as new: it left). */
#define CONCLAVE_PEER_ABSENT 0
/* Heard recently. */
#define CONCLAVE_PEER_CONNECTED 1
/* Silent too long; still probed. */
#define CONCLAVE_PEER_DISCONNECTED 2

/* Bytes of ConclavePeer.id, and a size that always holds a peer id with its NUL. */
#define CONCLAVE_PEER_ID_SIZE 36

/* A running node. 0 is never a handle. */
typedef uint64_t ConclaveHandle;

/* One peer of GetPeerList. */
typedef struct ConclavePeer {
    /* The peer id, NUL-terminated. */
    char id[CONCLAVE_PEER_ID_SIZE];
    /* CONCLAVE_PEER_CONNECTED or CONCLAVE_PEER_DISCONNECTED. */
    int32_t status;
    /* The last round-trip time in microseconds; -1 until one was measured. */
    int64_t rtt_us;
} ConclavePeer;

/* The leader this node knows changed: leader ("" when none), its term, this node's role. */
typedef void (*ConclaveLeaderChangedCallback)(const char *leader, uint64_t term, int32_t role,
                                              void *user_data);

/* A peer joined (old_status CONCLAVE_PEER_ABSENT), left (new_status CONCLAVE_PEER_ABSENT)
   or changed status. */
typedef void (*ConclavePeerStatusCallback)(const char *peer_id, int32_t old_status,
                                           int32_t new_status, void *user_data);

/*
 * Starts a node from the TOML text `config_toml` (the same keys and checks as
 * `conclave check-config`; the process environment is not read) and stores its handle
 * in `*handle`. Returns once the node runs: its WAL is open (its data directory locked)
 * and its sockets bound. Set admin.listen and metrics.listen to "" unless the program
 * wants those servers.
 */
int32_t ConclaveStart(const char *config_toml, ConclaveHandle *handle);

/*
 * Stops the node gracefully, as SIGTERM stops the daemon: a leader hands leadership to
 * a caught-up peer first, peers are told goodbye, the WAL is closed. Returns once the
 * node has stopped and its callback thread has delivered its last event (unless called
 * from a callback, which returns without waiting for its own thread). The handle is
 * refused from then on. Locks the handle holds are released first. A ConclaveLock
 * waiting on another thread is waited for.
 */
int32_t ConclaveStop(ConclaveHandle handle);

/*
 * Makes `peer_id` the leader (force master): a leadership transfer; asked of a follower,
 * the request goes to the leader it knows. Returns once the request is under way; the
 * leader-changed callback says when it took effect.
 */
int32_t SetLeader(ConclaveHandle handle, const char *peer_id);

/*
 * Switches automatic elections on or off (recorded in the WAL; outlives restarts).
 */
int32_t EnableAutoLeaderElection(ConclaveHandle handle, bool enabled);

/*
 * The leader this node knows, written to `leader` (NUL-terminated; "" when none is
 * known), and its term to `*term`: together the fencing token. `leader_len` is the
 * buffer's size; CONCLAVE_PEER_ID_SIZE always suffices.
 */
int32_t GetCurrentLeader(ConclaveHandle handle, char *leader, size_t leader_len, uint64_t *term);

/*
 * 1 when this node leads, 0 when it does not; CONCLAVE_ERR_STOPPED once the node has
 * halted (its WAL could not be written), another negative code on other failures.
 */
int32_t IsLeader(ConclaveHandle handle);

/*
 * The peer table: at most `capacity` peers are written to `peers`, and `*count` is
 * set to the number of peers in the table. When that is more than `capacity`, the
 * first `capacity` are written and CONCLAVE_ERR_BUFFER_TOO_SMALL is returned. `peers`
 * may be NULL when `capacity` is 0 (to ask for the count).
 */
int32_t GetPeerList(ConclaveHandle handle, ConclavePeer *peers, size_t capacity, size_t *count);

/*
 * Registers the function called on the callback thread for each peer that joins,
 * leaves or changes status (replacing any earlier one; NULL unregisters). Its strings
 * live until it returns.
 */
int32_t RegisterPeerStatusCallback(ConclaveHandle handle, ConclavePeerStatusCallback callback, void *user_data);

/*
 * Registers the function called on the callback thread each time the leader this node
 * knows changes, with the new leader ("" when none), its term and this node's role
 * (replacing any earlier one; NULL unregisters). Its strings live until it returns.
 */
int32_t RegisterLeaderChangedCallback(ConclaveHandle handle, ConclaveLeaderChangedCallback callback, void *user_data);

/*
 * Takes the cluster-wide lock `name` (the key conclave/locks/NAME of the replicated
 * log, the lock `conclave lock NAME` takes) and writes its fencing token to `*token`:
 * the store revision at which the lock was taken, larger for every later holder. Waits
 * while another holds it (this handle too, if it holds `name` already), at most
 * `timeout_ms` (0: try once; UINT64_MAX: as long as it takes), then
 * CONCLAVE_ERR_TIMEOUT. The lock's session is kept alive by the library
 * until ConclaveUnlock or ConclaveStop; if this process dies, the lock ends one session
 * TTL (10 s) later. Served by this node: needs log.enabled = true, and the node must
 * lead (CONCLAVE_ERR_REFUSED otherwise, the message naming the leader).
 */
int32_t ConclaveLock(ConclaveHandle handle, const char *name, uint64_t timeout_ms, uint64_t *token);

/*
 * Releases the lock `name` taken with ConclaveLock on this handle: its session is
 * revoked and the key deleted, and the next waiter takes it. CONCLAVE_ERR_NOT_HELD when
 * the handle does not hold it, or when it was lost meanwhile (its session ended: the
 * message says so, and whatever the lock protected may have been changed by another).
 */
int32_t ConclaveUnlock(ConclaveHandle handle, const char *name);

/*
 * Writes the message of the last call on this thread that failed into `message`
 * (NUL-terminated, "" when none failed), truncated to `message_len` bytes with
 * CONCLAVE_ERR_BUFFER_TOO_SMALL when it does not fit. Does not change the message.
 */
int32_t ConclaveLastError(char *message, size_t message_len);

#ifdef __cplusplus
}
#endif

#endif /* CONCLAVE_H */
