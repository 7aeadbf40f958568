/*
 * libiec61850's own GOOSE ping-pong: the reference the wire benchmark divides by.
 *
 * Built by lab/iec61850_pingpong.py against the libiec61850 shared library
 * that the pyiec61850-ng wheel ships (the wheel has no headers, so the few public API
 * functions used here are declared below from libiec61850's documented API; structs
 * stay opaque except CommParameters, which the API passes by pointer).
 *
 *   pong IFACE            subscribe to the PING stream; every new message is answered at
 *                         once by publishing the same sequence number on the PONG stream.
 *   ping IFACE N WARMUP [QUIET_US]
 *                         publish PING (new state each time: stNum+1), wait for the PONG
 *                         carrying the same number; print one round trip in ns per line.
 *                         QUIET_US: asleep before each timed ping (default 0).
 *
 * Both sides receive the way libiec61850's own receiver thread does (GooseReceiver_start):
 * EthernetHandleSet_waitReady on the receiver's socket, then GooseReceiver_tick, which
 * parses the frame and calls the subscriber's listener. Here that loop runs in the main
 * thread (the threadless API) so the listener's answer is not a hand-over between threads.
 */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    uint8_t vlanPriority;
    uint16_t vlanId;
    uint16_t appId;
    uint8_t dstAddress[6];
} CommParameters;

typedef void* GoosePublisher;
typedef void* GooseReceiver;
typedef void* GooseSubscriber;
typedef void* EthernetSocket;
typedef void* EthernetHandleSet;
typedef void* LinkedList;
typedef void MmsValue;
typedef void (*GooseListener)(GooseSubscriber subscriber, void* parameter);

GoosePublisher GoosePublisher_create(CommParameters* parameters, const char* interfaceID);
void GoosePublisher_setGoCbRef(GoosePublisher self, char* goCbRef);
void GoosePublisher_setDataSetRef(GoosePublisher self, char* dataSetRef);
void GoosePublisher_setGoID(GoosePublisher self, char* goID);
void GoosePublisher_setConfRev(GoosePublisher self, uint32_t confRev);
void GoosePublisher_setTimeAllowedToLive(GoosePublisher self, uint32_t tal);
uint64_t GoosePublisher_increaseStNum(GoosePublisher self);
int GoosePublisher_publish(GoosePublisher self, LinkedList dataSet);

GooseReceiver GooseReceiver_create(void);
void GooseReceiver_setInterfaceId(GooseReceiver self, const char* interfaceId);
void GooseReceiver_addSubscriber(GooseReceiver self, GooseSubscriber subscriber);
EthernetSocket GooseReceiver_startThreadless(GooseReceiver self);
bool GooseReceiver_tick(GooseReceiver self);

GooseSubscriber GooseSubscriber_create(char* goCbRef, MmsValue* dataSetValues);
void GooseSubscriber_setAppId(GooseSubscriber self, uint16_t appId);
void GooseSubscriber_setListener(GooseSubscriber self, GooseListener listener, void* parameter);
bool GooseSubscriber_isValid(GooseSubscriber self);
MmsValue* GooseSubscriber_getDataSetValues(GooseSubscriber self);

EthernetHandleSet EthernetHandleSet_new(void);
void EthernetHandleSet_addSocket(EthernetHandleSet self, const EthernetSocket sock);
int EthernetHandleSet_waitReady(EthernetHandleSet self, unsigned int timeoutMs);

LinkedList LinkedList_create(void);
void LinkedList_add(LinkedList list, void* data);
MmsValue* MmsValue_newIntegerFromInt32(int32_t value);
void MmsValue_setInt32(MmsValue* self, int32_t value);
MmsValue* MmsValue_getElement(const MmsValue* array, int index);
int32_t MmsValue_toInt32(const MmsValue* self);

#define PING_REF "PINGLD0/LLN0$GO$ping"
#define PONG_REF "PONGLD0/LLN0$GO$pong"
#define PING_APPID 0x3101
#define PONG_APPID 0x3102

typedef struct {
    GoosePublisher pub;
    LinkedList values;
    MmsValue* seq;
} Side;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int publisher(Side* side, const char* iface, uint16_t appid, char* ref)
{
    CommParameters p = {4, 0, appid, {0x01, 0x0c, 0xcd, 0x01, 0x00, (uint8_t) (appid & 0xff)}};
    side->pub = GoosePublisher_create(&p, iface);
    if (side->pub == NULL) {
        fprintf(stderr, "GoosePublisher_create(%s) failed (root? interface?)\n", iface);
        return -1;
    }
    GoosePublisher_setGoCbRef(side->pub, ref);
    GoosePublisher_setDataSetRef(side->pub, ref);
    GoosePublisher_setGoID(side->pub, ref);
    GoosePublisher_setConfRev(side->pub, 1);
    GoosePublisher_setTimeAllowedToLive(side->pub, 2000);
    side->values = LinkedList_create();
    side->seq = MmsValue_newIntegerFromInt32(0);
    LinkedList_add(side->values, side->seq);
    return 0;
}

static void send_seq(Side* side, int32_t seq)
{
    MmsValue_setInt32(side->seq, seq);
    GoosePublisher_increaseStNum(side->pub);
    GoosePublisher_publish(side->pub, side->values);
}

static int32_t received_seq(GooseSubscriber sub)
{
    if (!GooseSubscriber_isValid(sub))
        return -1;
    MmsValue* values = GooseSubscriber_getDataSetValues(sub);
    MmsValue* first = values ? MmsValue_getElement(values, 0) : NULL;
    return first ? MmsValue_toInt32(first) : -1;
}

/* -- pong ---------------------------------------------------------------------------- */

static Side pong_side;

static void on_ping(GooseSubscriber sub, void* param)
{
    (void) param;
    int32_t seq = received_seq(sub);
    if (seq >= 0)
        send_seq(&pong_side, seq);
}

/* -- ping ---------------------------------------------------------------------------- */

static int32_t last_pong = -1;

static void on_pong(GooseSubscriber sub, void* param)
{
    (void) param;
    last_pong = received_seq(sub);
}

static EthernetHandleSet receiver(const char* iface, char* ref, uint16_t appid,
                                  GooseListener listener, GooseReceiver* out)
{
    GooseReceiver rx = GooseReceiver_create();
    GooseReceiver_setInterfaceId(rx, iface);
    GooseSubscriber sub = GooseSubscriber_create(ref, NULL);
    GooseSubscriber_setAppId(sub, appid);
    GooseSubscriber_setListener(sub, listener, NULL);
    GooseReceiver_addSubscriber(rx, sub);
    EthernetSocket sock = GooseReceiver_startThreadless(rx);
    if (sock == NULL) {
        fprintf(stderr, "GooseReceiver_startThreadless(%s) failed\n", iface);
        return NULL;
    }
    EthernetHandleSet hs = EthernetHandleSet_new();
    EthernetHandleSet_addSocket(hs, sock);
    *out = rx;
    return hs;
}

/* Wait up to timeout_ms for the pong numbered seq; its round trip in ns, or -1. */
static int64_t wait_pong(EthernetHandleSet hs, GooseReceiver rx, int32_t seq, int64_t t0,
                         int timeout_ms)
{
    int64_t deadline = t0 + (int64_t) timeout_ms * 1000000;
    while (now_ns() < deadline) {
        if (EthernetHandleSet_waitReady(hs, 10) > 0) {
            while (GooseReceiver_tick(rx)) {
                if (last_pong == seq)
                    return now_ns() - t0;
            }
        }
    }
    return -1;
}

/* quiet_us: asleep before each timed ping (the quiet the wire benchmark's trips follow) */
static int run_ping(const char* iface, long n, long warmup, long quiet_us)
{
    Side side;
    GooseReceiver rx;
    if (publisher(&side, iface, PING_APPID, PING_REF) != 0)
        return 2;
    EthernetHandleSet hs = receiver(iface, PONG_REF, PONG_APPID, on_pong, &rx);
    if (hs == NULL)
        return 2;
    int32_t seq = 0;
    /* the first frames after a receiver starts are lost (its socket is not yet bound):
       repeat the first ping until a pong comes back, then warm up */
    for (int tries = 0;; tries++) {
        seq++;
        int64_t t0 = now_ns();
        send_seq(&side, seq);
        if (wait_pong(hs, rx, seq, t0, 20) >= 0)
            break;
        if (tries > 250) {
            fprintf(stderr, "no pong from the peer after %d pings\n", tries);
            return 3;
        }
    }
    for (long i = 0; i < warmup + n; i++) {
        if (i >= warmup && quiet_us > 0) {
            struct timespec quiet = {quiet_us / 1000000, (quiet_us % 1000000) * 1000};
            nanosleep(&quiet, NULL);
        }
        seq++;
        int64_t t0 = now_ns();
        send_seq(&side, seq);
        int64_t rtt = wait_pong(hs, rx, seq, t0, 2000);
        if (rtt < 0) {
            fprintf(stderr, "pong %d did not come back within 2 s\n", seq);
            return 4;
        }
        if (i >= warmup)
            printf("%lld\n", (long long) rtt);
    }
    fflush(stdout);
    return 0;
}

static int run_pong(const char* iface)
{
    GooseReceiver rx;
    if (publisher(&pong_side, iface, PONG_APPID, PONG_REF) != 0)
        return 2;
    EthernetHandleSet hs = receiver(iface, PING_REF, PING_APPID, on_ping, &rx);
    if (hs == NULL)
        return 2;
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        if (EthernetHandleSet_waitReady(hs, 100) > 0)
            GooseReceiver_tick(rx);
    }
}

int main(int argc, char** argv)
{
    if (argc == 3 && strcmp(argv[1], "pong") == 0)
        return run_pong(argv[2]);
    if ((argc == 5 || argc == 6) && strcmp(argv[1], "ping") == 0)
        return run_ping(argv[2], atol(argv[3]), atol(argv[4]), argc == 6 ? atol(argv[5]) : 0);
    fprintf(stderr, "usage: %s pong IFACE | ping IFACE N WARMUP [QUIET_US]\n", argv[0]);
    return 1;
}
