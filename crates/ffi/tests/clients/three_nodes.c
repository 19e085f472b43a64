/*
 * Three conclave nodes in one C program, through include/conclave.h (EMB-2, EMB-3): one
 * leader, seen by IsLeader on exactly one node and by GetCurrentLeader on all; SetLeader
 * moves leadership; ConclaveStop of the leader hands over, and the other nodes'
 * leader-changed callbacks report a new leader in a higher term. Callbacks call back into the
 * API. Misuse (a NULL, unknown or stopped handle, a bad peer id, a bad configuration) is an
 * error code with a message, never a crash.
 *
 * usage: three_nodes ID_A A.toml ID_B B.toml ID_C C.toml   (exit status 0: every check held)
 */
#include <conclave.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NODES 3
#define MAX_EVENTS 256
#define PATIENCE_MS 30000

struct leader_event {
    char leader[CONCLAVE_PEER_ID_SIZE];
    uint64_t term;
    int32_t role;
};

/* What the callbacks of one node saw; the callback thread writes, main reads. */
struct node_view {
    ConclaveHandle handle;
    char id[CONCLAVE_PEER_ID_SIZE];
    pthread_mutex_t lock;
    struct leader_event events[MAX_EVENTS];
    int count;
    int peer_events;
    int reentrant_answers;
    int reentrant_failures;
    int out_of_order;
};

static struct node_view views[NODES];

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fprintf(stderr, "\n");                                              \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void pause_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static const char *last_error(void) {
    static char message[1024];
    ConclaveLastError(message, sizeof message);
    return message;
}

static char *read_file(const char *path) {
    FILE *file = fopen(path, "rb");
    CHECK(file != NULL, "cannot open %s", path);
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    fseek(file, 0, SEEK_SET);
    char *text = malloc((size_t)size + 1);
    CHECK(text != NULL && fread(text, 1, (size_t)size, file) == (size_t)size, "cannot read %s", path);
    text[size] = '\0';
    fclose(file);
    return text;
}

static void on_leader_changed(const char *leader, uint64_t term, int32_t role, void *user_data) {
    struct node_view *view = user_data;
    /* Calling back into the API from the callback thread must not deadlock. */
    int leads = IsLeader(view->handle);
    pthread_mutex_lock(&view->lock);
    if (leads == 0 || leads == 1) {
        view->reentrant_answers++;
    } else if (leads != CONCLAVE_ERR_STOPPED && leads != CONCLAVE_ERR_INVALID_HANDLE) {
        /* Only a node being stopped may refuse. */
        view->reentrant_failures++;
    }
    if (view->count > 0 && view->events[view->count - 1].term > term) {
        view->out_of_order++;
    }
    if (view->count < MAX_EVENTS) {
        struct leader_event *event = &view->events[view->count++];
        snprintf(event->leader, sizeof event->leader, "%s", leader);
        event->term = term;
        event->role = role;
    }
    pthread_mutex_unlock(&view->lock);
}

static void on_peer_status(const char *peer_id, int32_t old_status, int32_t new_status, void *user_data) {
    struct node_view *view = user_data;
    (void)old_status;
    (void)new_status;
    CHECK(strlen(peer_id) > 0, "a peer event without a peer id");
    pthread_mutex_lock(&view->lock);
    view->peer_events++;
    pthread_mutex_unlock(&view->lock);
}

/* Whether node `node`'s leader-changed callback reported `wanted` (any leader when NULL) in
   a term above `above`; that term goes to *term. */
static int saw_leader(int node, const char *wanted, uint64_t above, uint64_t *term) {
    struct node_view *view = &views[node];
    int found = 0;
    pthread_mutex_lock(&view->lock);
    for (int i = 0; i < view->count; i++) {
        struct leader_event *event = &view->events[i];
        int matches = wanted ? strcmp(event->leader, wanted) == 0 : event->leader[0] != '\0';
        if (matches && event->term > above) {
            if (term) {
                *term = event->term;
            }
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&view->lock);
    return found;
}

/* The index of the one node that leads with all running nodes agreeing, or -1. */
static int agreed_leader(const int running[NODES], uint64_t *term) {
    int leader = -1;
    char first[CONCLAVE_PEER_ID_SIZE] = "";
    for (int i = 0; i < NODES; i++) {
        if (!running[i]) {
            continue;
        }
        char name[CONCLAVE_PEER_ID_SIZE];
        uint64_t t = 0;
        CHECK(GetCurrentLeader(views[i].handle, name, sizeof name, &t) == CONCLAVE_OK, "%s", last_error());
        if (name[0] == '\0' || (first[0] != '\0' && strcmp(first, name) != 0)) {
            return -1;
        }
        snprintf(first, sizeof first, "%s", name);
        *term = t;
        int leads = IsLeader(views[i].handle);
        CHECK(leads == 0 || leads == 1, "IsLeader: %d %s", leads, last_error());
        if (leads) {
            if (leader >= 0) {
                return -1;
            }
            leader = i;
        }
    }
    if (leader >= 0 && strcmp(views[leader].id, first) != 0) {
        return -1;
    }
    return leader;
}

static int wait_agreed_leader(const int running[NODES], uint64_t *term) {
    long deadline = now_ms() + PATIENCE_MS;
    for (;;) {
        int leader = agreed_leader(running, term);
        if (leader >= 0) {
            return leader;
        }
        CHECK(now_ms() < deadline, "no agreed leader within %d ms", PATIENCE_MS);
        pause_ms(20);
    }
}

static void check_misuse(void) {
    char name[CONCLAVE_PEER_ID_SIZE];
    uint64_t term;
    CHECK(IsLeader(0) == CONCLAVE_ERR_INVALID_HANDLE, "a zero handle");
    CHECK(strstr(last_error(), "handle 0") != NULL, "message: %s", last_error());
    CHECK(IsLeader(987654321) == CONCLAVE_ERR_INVALID_HANDLE, "an unknown handle");
    CHECK(GetCurrentLeader(views[0].handle, NULL, 0, &term) == CONCLAVE_ERR_INVALID_ARGUMENT, "a NULL buffer");
    CHECK(GetCurrentLeader(views[0].handle, name, sizeof name, NULL) == CONCLAVE_ERR_INVALID_ARGUMENT, "a NULL term");
    CHECK(SetLeader(views[0].handle, NULL) == CONCLAVE_ERR_INVALID_ARGUMENT, "a NULL peer id");
    CHECK(SetLeader(views[0].handle, "not a valid id!") == CONCLAVE_ERR_INVALID_ARGUMENT, "a bad peer id");
    CHECK(strstr(last_error(), "peer_id") != NULL, "message: %s", last_error());
    ConclaveHandle handle = 0;
    CHECK(ConclaveStart("[election]\nmode = \"paxos\"\n", &handle) == CONCLAVE_ERR_CONFIG, "a bad mode");
    CHECK(strstr(last_error(), "election.mode") != NULL, "message: %s", last_error());
    CHECK(handle == 0, "a handle was given for a refused configuration");
    CHECK(ConclaveStart("[node", &handle) == CONCLAVE_ERR_CONFIG, "text that is not TOML");
    CHECK(ConclaveStart(NULL, &handle) == CONCLAVE_ERR_INVALID_ARGUMENT, "a NULL configuration");
    CHECK(ConclaveStop(0) == CONCLAVE_ERR_INVALID_HANDLE, "stopping a zero handle");
    char tiny[4];
    CHECK(ConclaveLastError(tiny, sizeof tiny) == CONCLAVE_ERR_BUFFER_TOO_SMALL, "a short message buffer");
    CHECK(strlen(tiny) == 3, "a truncated message is NUL-terminated");
}

int main(int argc, char **argv) {
    CHECK(argc == 2 * NODES + 1, "usage: %s ID_A A.toml ID_B B.toml ID_C C.toml", argv[0]);
    int running[NODES];
    for (int i = 0; i < NODES; i++) {
        struct node_view *view = &views[i];
        pthread_mutex_init(&view->lock, NULL);
        snprintf(view->id, sizeof view->id, "%s", argv[2 * i + 1]);
        char *toml = read_file(argv[2 * i + 2]);
        CHECK(ConclaveStart(toml, &view->handle) == CONCLAVE_OK, "start %s: %s", view->id, last_error());
        free(toml); /* copied by ConclaveStart */
        CHECK(view->handle != 0, "a zero handle was given");
        CHECK(RegisterLeaderChangedCallback(view->handle, on_leader_changed, view) == CONCLAVE_OK, "%s", last_error());
        CHECK(RegisterPeerStatusCallback(view->handle, on_peer_status, view) == CONCLAVE_OK, "%s", last_error());
        running[i] = 1;
    }

    uint64_t term = 0;
    int leader = wait_agreed_leader(running, &term);
    ConclavePeer peers[NODES];
    size_t count = 0;
    CHECK(GetPeerList(views[leader].handle, peers, NODES, &count) == CONCLAVE_OK, "%s", last_error());
    CHECK(count == 2, "the leader has %zu peers", count);
    for (size_t p = 0; p < count; p++) {
        CHECK(peers[p].status == CONCLAVE_PEER_CONNECTED, "peer %s is %d", peers[p].id, peers[p].status);
    }
    CHECK(GetPeerList(views[leader].handle, NULL, 0, &count) == CONCLAVE_ERR_BUFFER_TOO_SMALL && count == 2,
          "asking for the count");
    check_misuse();
    printf("leader %s in term %llu\n", views[leader].id, (unsigned long long)term);
    long deadline = now_ms() + PATIENCE_MS;
    while (!saw_leader(leader, views[leader].id, 0, NULL)) {
        CHECK(now_ms() < deadline, "the leader's own callback never fired");
        pause_ms(20);
    }

    /* SetLeader moves leadership to another node. */
    int target = (leader + 1) % NODES;
    CHECK(SetLeader(views[leader].handle, views[target].id) == CONCLAVE_OK, "%s", last_error());
    uint64_t moved_term = 0;
    deadline = now_ms() + PATIENCE_MS;
    while (!saw_leader(target, views[target].id, term, &moved_term) || IsLeader(views[target].handle) != 1) {
        CHECK(now_ms() < deadline, "SetLeader did not move leadership to %s", views[target].id);
        pause_ms(20);
    }
    printf("set_leader moved leadership to %s in term %llu\n", views[target].id, (unsigned long long)moved_term);

    /* Stopping the leader hands over; the others' callbacks report a new leader, higher term. */
    CHECK(ConclaveStop(views[target].handle) == CONCLAVE_OK, "%s", last_error());
    running[target] = 0;
    CHECK(IsLeader(views[target].handle) == CONCLAVE_ERR_INVALID_HANDLE, "a stopped handle was accepted");
    CHECK(ConclaveStop(views[target].handle) == CONCLAVE_ERR_INVALID_HANDLE, "a second stop was accepted");
    deadline = now_ms() + PATIENCE_MS;
    for (int i = 0; i < NODES; i++) {
        if (!running[i]) {
            continue;
        }
        uint64_t new_term = 0;
        while (!saw_leader(i, NULL, moved_term, &new_term)) {
            CHECK(now_ms() < deadline, "node %d never heard of a successor", i);
            pause_ms(20);
        }
        CHECK(new_term > moved_term, "term %llu", (unsigned long long)new_term);
    }
    uint64_t final_term = 0;
    int successor = wait_agreed_leader(running, &final_term);
    CHECK(successor != target && final_term > moved_term, "successor %d term %llu", successor,
          (unsigned long long)final_term);
    printf("after the stop, %s leads in term %llu\n", views[successor].id, (unsigned long long)final_term);

    for (int i = 0; i < NODES; i++) {
        if (running[i]) {
            CHECK(ConclaveStop(views[i].handle) == CONCLAVE_OK, "%s", last_error());
        }
    }
    for (int i = 0; i < NODES; i++) {
        CHECK(views[i].reentrant_failures == 0, "node %d: IsLeader failed inside a callback", i);
        CHECK(views[i].reentrant_answers > 0, "node %d: IsLeader never answered inside a callback", i);
        CHECK(views[i].out_of_order == 0, "node %d: leader events out of term order", i);
        CHECK(views[i].peer_events > 0, "node %d: no peer status callback", i);
        pthread_mutex_destroy(&views[i].lock);
    }
    printf("ok\n");
    return 0;
}
