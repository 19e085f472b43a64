/*
 * Start/stop cycles of one node through the C ABI (EMB-2): each cycle starts a node with a
 * UDP socket and a callback, waits until it leads, and stops it. After a few warm-up cycles
 * (lazily made globals, log call sites), the process's threads (counted in /proc/self/task)
 * must come back to the program's own after every cycle, its open file descriptors (in
 * /proc/self/fd) to the number after the warm-up, and the bytes malloc holds must not grow
 * with the number of cycles.
 *
 * usage: cycles CONFIG.toml CYCLES MAX_GROWTH_BYTES     (exit status 0: nothing leaked)
 */
#include <conclave.h>

#include <dirent.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WARM_UP 5
#define PATIENCE_MS 30000

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

static int entries(const char *dir) {
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    int n = 0;
    struct dirent *entry;
    while ((entry = readdir(d)) != NULL) {
        if (entry->d_name[0] != '.') {
            n++;
        }
    }
    closedir(d);
    return n - (strcmp(dir, "/proc/self/fd") == 0); /* the directory stream's own fd */
}

struct leadership {
    pthread_mutex_t lock;
    int leads;
};

static void on_leader_changed(const char *leader, uint64_t term, int32_t role, void *user_data) {
    struct leadership *state = user_data;
    (void)leader;
    (void)term;
    pthread_mutex_lock(&state->lock);
    state->leads |= role == CONCLAVE_ROLE_LEADER;
    pthread_mutex_unlock(&state->lock);
}

static void cycle(const char *toml) {
    struct leadership state = {PTHREAD_MUTEX_INITIALIZER, 0};
    ConclaveHandle handle = 0;
    CHECK(ConclaveStart(toml, &handle) == CONCLAVE_OK, "%s", last_error());
    CHECK(RegisterLeaderChangedCallback(handle, on_leader_changed, &state) == CONCLAVE_OK, "%s", last_error());
    long deadline = now_ms() + PATIENCE_MS;
    for (;;) {
        pthread_mutex_lock(&state.lock);
        int told = state.leads;
        pthread_mutex_unlock(&state.lock);
        /* A callback reports changes from its registration on: the node may have led before
           it was registered, which IsLeader tells. */
        if (told || IsLeader(handle) == 1) {
            break;
        }
        CHECK(now_ms() < deadline, "the node never led");
        pause_ms(2);
    }
    CHECK(ConclaveStop(handle) == CONCLAVE_OK, "%s", last_error());
    CHECK(IsLeader(handle) == CONCLAVE_ERR_INVALID_HANDLE, "a stopped handle was accepted");
}

/* Threads may take a moment to finish exiting after being told to; wait for the count to
   come back to `expected` (or fail after the deadline). */
static void settle(const char *dir, int expected, int cycle_number) {
    long deadline = now_ms() + PATIENCE_MS;
    int n;
    while ((n = entries(dir)) != expected) {
        CHECK(now_ms() < deadline, "cycle %d: %s holds %d entries, %d before", cycle_number, dir, n, expected);
        pause_ms(5);
    }
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

int main(int argc, char **argv) {
    CHECK(argc == 4, "usage: %s CONFIG.toml CYCLES MAX_GROWTH_BYTES", argv[0]);
    char *toml = read_file(argv[1]);
    int cycles = atoi(argv[2]);
    long max_growth = atol(argv[3]);
    /* Every thread the library starts for a node ends with it: the count goes back to this
       program's own. (A node's last threads finish exiting just after ConclaveStop.) */
    int threads = entries("/proc/self/task");
    for (int i = 0; i < WARM_UP; i++) {
        cycle(toml);
    }
    settle("/proc/self/task", threads, 0);
    int fds = entries("/proc/self/fd");
    size_t held = mallinfo2().uordblks;
    for (int i = 1; i <= cycles; i++) {
        cycle(toml);
        settle("/proc/self/task", threads, i);
        settle("/proc/self/fd", fds, i);
    }
    long growth = (long)mallinfo2().uordblks - (long)held;
    printf("%d cycles: threads %d, fds %d, malloc'd bytes %+ld\n", cycles, threads, fds, growth);
    CHECK(growth <= max_growth, "%ld bytes more held after %d cycles (at most %ld allowed)", growth, cycles, max_growth);
    free(toml);
    printf("ok\n");
    return 0;
}
