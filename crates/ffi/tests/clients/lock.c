/*
 * The lock pair of include/conclave.h (SESS-4): one node with the replicated log, which
 * leads alone. ConclaveLock gives a token; while it is held, ConclaveLock with timeout 0 is
 * CONCLAVE_ERR_TIMEOUT and a thread waiting in ConclaveLock gets the lock only once
 * ConclaveUnlock released it, with a larger token. Misuse (NULL arguments, a lock not held,
 * a stopped handle) is an error code with a message, never a crash.
 *
 * usage: lock NODE.toml   (exit status 0: every check held)
 */
#include <conclave.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* The waiting thread's view: it sets `taken` once ConclaveLock returned. */
struct waiter {
    ConclaveHandle handle;
    pthread_mutex_t lock;
    int taken;
    int32_t status;
    uint64_t token;
};

static void *wait_for_lock(void *arg) {
    struct waiter *waiter = arg;
    uint64_t token = 0;
    int32_t status = ConclaveLock(waiter->handle, "job", (uint64_t)PATIENCE_MS, &token);
    pthread_mutex_lock(&waiter->lock);
    waiter->status = status;
    waiter->token = token;
    waiter->taken = 1;
    pthread_mutex_unlock(&waiter->lock);
    return NULL;
}

static int taken(struct waiter *waiter) {
    pthread_mutex_lock(&waiter->lock);
    int done = waiter->taken;
    pthread_mutex_unlock(&waiter->lock);
    return done;
}

int main(int argc, char **argv) {
    CHECK(argc == 2, "usage: lock NODE.toml");
    char *toml = read_file(argv[1]);
    ConclaveHandle handle = 0;
    CHECK(ConclaveStart(toml, &handle) == CONCLAVE_OK, "start: %s", last_error());
    free(toml);
    long deadline = now_ms() + PATIENCE_MS;
    while (IsLeader(handle) != 1) {
        CHECK(now_ms() < deadline, "the node never led");
        pause_ms(10);
    }

    uint64_t first = 0;
    CHECK(ConclaveLock(handle, "job", 0, &first) == CONCLAVE_OK, "lock: %s", last_error());
    CHECK(first > 0, "token %llu", (unsigned long long)first);

    uint64_t busy = 0;
    CHECK(ConclaveLock(handle, "job", 0, &busy) == CONCLAVE_ERR_TIMEOUT, "a held lock was taken again");
    CHECK(strstr(last_error(), "conclave/locks/job") != NULL, "message: %s", last_error());
    CHECK(ConclaveLock(handle, NULL, 0, &busy) == CONCLAVE_ERR_INVALID_ARGUMENT, "NULL name");
    CHECK(ConclaveLock(handle, "job", 0, NULL) == CONCLAVE_ERR_INVALID_ARGUMENT, "NULL token");
    CHECK(ConclaveUnlock(handle, "never-taken") == CONCLAVE_ERR_NOT_HELD, "unlock of a stranger");
    CHECK(strstr(last_error(), "never-taken") != NULL, "message: %s", last_error());

    struct waiter waiter = {.handle = handle, .lock = PTHREAD_MUTEX_INITIALIZER};
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, wait_for_lock, &waiter) == 0, "pthread_create");
    /* The waiter cannot get the lock while it is held: it has not returned. */
    CHECK(!taken(&waiter), "the waiter took a held lock");
    CHECK(ConclaveUnlock(handle, "job") == CONCLAVE_OK, "unlock: %s", last_error());
    CHECK(pthread_join(thread, NULL) == 0, "pthread_join");
    CHECK(waiter.status == CONCLAVE_OK, "the waiter: %d", waiter.status);
    CHECK(waiter.token > first, "tokens %llu then %llu", (unsigned long long)first,
          (unsigned long long)waiter.token);
    CHECK(ConclaveUnlock(handle, "job") == CONCLAVE_OK, "unlock the waiter's: %s", last_error());
    CHECK(ConclaveUnlock(handle, "job") == CONCLAVE_ERR_NOT_HELD, "unlocked twice");

    uint64_t kept = 0;
    CHECK(ConclaveLock(handle, "kept", 0, &kept) == CONCLAVE_OK, "lock: %s", last_error());
    CHECK(kept > waiter.token, "tokens grow: %llu", (unsigned long long)kept);
    /* ConclaveStop releases what the handle holds; the handle is refused afterwards. */
    CHECK(ConclaveStop(handle) == CONCLAVE_OK, "stop: %s", last_error());
    CHECK(ConclaveLock(handle, "job", 0, &kept) == CONCLAVE_ERR_INVALID_HANDLE, "stale handle");
    CHECK(ConclaveUnlock(handle, "kept") == CONCLAVE_ERR_INVALID_HANDLE, "stale handle");
    printf("ok\n");
    return 0;
}
