// bench_pslite: bench_pushpull's cases on ps-lite (dmlc/ps-lite), for the
// side-by-side of bench/run_pslite.sh. Not part of Loom's build: the script
// compiles it against a ps-lite checkout the user built.
//
// The same shape as bench_pushpull (bench/bench_pushpull.c) and raw_zmq
// --table: each server keeps its share of a dense float table of R rows of
// `width` floats and adds pushed rows into it; a pull is answered with the
// rows gathered into the reply and copied by the worker into its array.
// ps-lite spreads keys over [0, kMaxKey) by range, so row i is key
// i * (kMaxKey / R). For every width and batch b, each worker runs a timed
// push phase (ZPush of the b keys i * R / b, Wait for the servers' replies)
// and a pull phase (ZPull of the same keys, Wait), each after untimed
// warm-ups, until --seconds passed and --min-iters were done, or --max-iters;
// phases start together (a barrier of the workers). The zero-copy calls are
// ps-lite's fastest path; every operation is timed on its own.
//
// Worker 0 prints bench_pushpull's "case" line for each case (all workers'
// keys over the longest worker's phase; the largest of their p50 and p99),
// after every worker pushed its figures into a second, summing KV app
// (app id 1), so that run_pushpull's awk reads the three programs alike.
// No one-key round trips (--rtt is accepted and ignored).
//
// Roles and the rendezvous come from ps-lite's DMLC_* environment
// (bench/run_pslite.sh sets them).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ps/ps.h"

using namespace ps;

namespace {

struct options {
    std::vector<uint64_t> widths{1, 64};
    std::vector<uint64_t> batches{1, 100, 10000, 100000, 1000000};
    double seconds = 0.5;
    uint64_t min_iters = 3, max_iters = 100000, key_range = 0;
};

std::vector<uint64_t> parse_list(const char *s)
{
    std::vector<uint64_t> out;
    for (const char *p = s; *p;) {
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p || v == 0) {
            fprintf(stderr, "bench_pslite: bad list '%s'\n", s);
            exit(2);
        }
        out.push_back(v);
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') {
            fprintf(stderr, "bench_pslite: bad list '%s'\n", s);
            exit(2);
        }
    }
    return out;
}

options parse(int argc, char **argv)
{
    options o;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (i + 1 >= argc) {
            fprintf(stderr, "bench_pslite: %s needs a value\n", a.c_str());
            exit(2);
        }
        const char *v = argv[++i];
        if (a == "--widths") o.widths = parse_list(v);
        else if (a == "--batches") o.batches = parse_list(v);
        else if (a == "--seconds") o.seconds = atof(v);
        else if (a == "--min-iters") o.min_iters = strtoull(v, nullptr, 10);
        else if (a == "--max-iters") o.max_iters = strtoull(v, nullptr, 10);
        else if (a == "--key-range") o.key_range = strtoull(v, nullptr, 10);
        else if (a == "--rtt") continue;
        else {
            fprintf(stderr, "bench_pslite: unknown flag %s\n", a.c_str());
            exit(2);
        }
    }
    if (!o.key_range) o.key_range = *std::max_element(o.batches.begin(), o.batches.end());
    return o;
}

options opt;

Key stride() { return kMaxKey / opt.key_range; }

// The table: rows of every width in one store, the row's width told by the
// request's value count (ps-lite sends vals.size() / keys.size() per key).
struct dense_table {
    std::vector<float> rows;
    uint64_t width = 0;
    void operator()(const KVMeta &meta, const KVPairs<float> &req, KVServer<float> *server)
    {
        size_t n = req.keys.size();
        uint64_t w = meta.push ? (n ? req.vals.size() / n : 1) : meta.cmd;
        if (w != width) {
            rows.assign(opt.key_range * w, 0.0f);
            width = w;
        }
        KVPairs<float> res;
        if (meta.pull) {
            res.keys = req.keys;
            res.vals.resize(n * w);
        }
        const Key step = stride(); // once: a division per key would slow the peer
        for (size_t i = 0; i < n; i++) {
            float *row = rows.data() + req.keys[i] / step * w;
            if (meta.push)
                for (uint64_t j = 0; j < w; j++) row[j] += req.vals[i * w + j];
            else
                memcpy(res.vals.data() + i * w, row, w * sizeof(float));
        }
        server->Response(meta, res);
    }
};

void sum_stats(const KVMeta &meta, const KVPairs<double> &req, KVServer<double> *server)
{
    static std::unordered_map<Key, double> store;
    KVPairs<double> res;
    if (meta.pull) {
        res.keys = req.keys;
        res.vals.resize(req.keys.size());
    }
    for (size_t i = 0; i < req.keys.size(); i++) {
        if (meta.push) store[req.keys[i]] += req.vals[i];
        if (meta.pull) res.vals[i] = store[req.keys[i]];
    }
    server->Response(meta, res);
}

double now_s()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct phase {
    uint64_t iters = 0;
    double seconds = 0, p50_us = 0, p99_us = 0;
};

// One timed phase: op() until the budget, each call timed.
template <typename F> phase run_phase(F op)
{
    for (int i = 0; i < 3; i++) op(); // warm-up
    Postoffice::Get()->Barrier(0, kWorkerGroup);
    std::vector<double> us;
    double start = now_s(), t = start;
    while (us.size() < opt.max_iters && (us.size() < opt.min_iters || t - start < opt.seconds)) {
        double t0 = now_s();
        op();
        t = now_s();
        us.push_back((t - t0) * 1e6);
    }
    phase p;
    p.iters = us.size();
    p.seconds = t - start;
    std::sort(us.begin(), us.end());
    p.p50_us = us[us.size() / 2];
    p.p99_us = us[std::min(us.size() - 1, (size_t)(us.size() * 0.99))];
    return p;
}

void run_worker()
{
    KVWorker<float> kv(0, 0);
    KVWorker<double> stats(1, 0);
    int rank = MyRank(), nw = NumWorkers();
    uint64_t index = 0;
    for (uint64_t width : opt.widths) {
        for (uint64_t b : opt.batches) {
            SArray<Key> keys(b);
            for (uint64_t i = 0; i < b; i++) keys[i] = i * opt.key_range / b * stride();
            SArray<float> vals(b * width, 1.0f), got(b * width);
            phase push = run_phase([&] { kv.Wait(kv.ZPush(keys, vals)); });
            phase pull = run_phase([&] { kv.Wait(kv.ZPull(keys, &got, nullptr, (int)width)); });
            // Figures: keys and time of each phase, then p50 and p99.
            std::vector<Key> k;
            std::vector<double> v = {double(push.iters * b), push.seconds, push.p50_us, push.p99_us,
                                     double(pull.iters * b), pull.seconds, pull.p50_us, pull.p99_us};
            for (int j = 0; j < 8; j++) k.push_back((index * nw + rank) * 8 + j);
            stats.Wait(stats.Push(k, v));
            Postoffice::Get()->Barrier(0, kWorkerGroup);
            if (rank == 0) {
                std::vector<Key> all;
                for (int r = 0; r < nw; r++)
                    for (int j = 0; j < 8; j++) all.push_back((index * nw + r) * 8 + j);
                std::vector<double> f;
                stats.Wait(stats.Pull(all, &f));
                printf("case %5llu %8llu", (unsigned long long)width, (unsigned long long)b);
                for (int o = 0; o < 2; o++) {
                    double keys_done = 0, longest = 0, p50 = 0, p99 = 0;
                    for (int r = 0; r < nw; r++) {
                        const double *x = &f[r * 8 + o * 4];
                        keys_done += x[0];
                        longest = std::max(longest, x[1]);
                        p50 = std::max(p50, x[2]);
                        p99 = std::max(p99, x[3]);
                    }
                    double kps = keys_done / longest;
                    printf(" %8llu %12.0f %10.1f %10.1f %10.1f",
                           (unsigned long long)(o ? pull.iters : push.iters), kps,
                           kps * (8.0 + 4.0 * width) / 1e6, p50, p99);
                }
                printf("\n");
                fflush(stdout);
            }
            index++;
        }
    }
}

} // namespace

int main(int argc, char **argv)
{
    opt = parse(argc, argv);
    Start(0);
    KVServer<float> *table = nullptr;
    KVServer<double> *stats = nullptr;
    if (IsServer()) {
        table = new KVServer<float>(0);
        table->set_request_handle(dense_table());
        stats = new KVServer<double>(1);
        stats->set_request_handle(sum_stats);
    }
    if (IsWorker()) {
        if (MyRank() == 0)
            printf("ps-lite (dense table): %d servers, %d workers, key range %llu, %.2f s per phase\n",
                   NumServers(), NumWorkers(), (unsigned long long)opt.key_range, opt.seconds);
        run_worker();
    }
    Finalize(0, true);
    delete table;
    delete stats;
    return 0;
}
