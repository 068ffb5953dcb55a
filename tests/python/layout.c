/* layout: what the C compiler says about the public API's structures, as JSON, for
 * tests/python/test_library.py to compare with the Python package's ctypes mirror
 * (python/loom/_capi.py): every field's offset and size, the error codes, and the
 * values of LOOM_TABLE_OPTS_DEFAULT (which the package's defaults must equal). */
#include <stddef.h>
#include <stdio.h>

#include <loom/data.h>
#include <loom/loom.h>

#define FIELD(type, f)                                                                             \
    printf("%s\"%s\": [%zu, %zu]", first ? "" : ", ", #f, offsetof(type, f),                       \
           sizeof(((type *)0)->f)),                                                                \
        first = 0

int main(void)
{
    int first = 1;
    printf("{\"table_opts\": {\"size\": [0, %zu], ", sizeof(loom_table_opts));
    first = 1;
    FIELD(loom_table_opts, type);
    FIELD(loom_table_opts, width);
    FIELD(loom_table_opts, storage);
    FIELD(loom_table_opts, key_begin);
    FIELD(loom_table_opts, key_end);
    FIELD(loom_table_opts, consistency);
    FIELD(loom_table_opts, staleness);
    FIELD(loom_table_opts, updater);
    FIELD(loom_table_opts, lr);
    FIELD(loom_table_opts, beta);
    FIELD(loom_table_opts, l1);
    FIELD(loom_table_opts, l2);
    FIELD(loom_table_opts, eps);
    FIELD(loom_table_opts, params);
    FIELD(loom_table_opts, init);
    FIELD(loom_table_opts, init_a);
    FIELD(loom_table_opts, init_b);
    FIELD(loom_table_opts, init_seed);
    FIELD(loom_table_opts, cache);
    FIELD(loom_table_opts, flush_rows);
    FIELD(loom_table_opts, filter_push);
    FIELD(loom_table_opts, filter_pull);
    FIELD(loom_table_opts, bandwidth_mbits);
    FIELD(loom_table_opts, priority);
    FIELD(loom_table_opts, queue_rows);
    printf("}, \"stats\": {\"size\": [0, %zu], ", sizeof(loom_stats));
    first = 1;
    FIELD(loom_stats, bytes_sent);
    FIELD(loom_stats, bytes_received);
    FIELD(loom_stats, messages_sent);
    FIELD(loom_stats, messages_received);
    FIELD(loom_stats, malformed_dropped);
    FIELD(loom_stats, connections_refused);
    FIELD(loom_stats, pulls_from_cache);
    FIELD(loom_stats, pulls_from_server);
    FIELD(loom_stats, table_messages);
    FIELD(loom_stats, table_bytes_raw);
    FIELD(loom_stats, table_bytes_wire);
    FIELD(loom_stats, managed_rows_sent);
    FIELD(loom_stats, pushed_rows_received);
    FIELD(loom_stats, replicated_bytes);
    FIELD(loom_stats, pushes_resent);
    FIELD(loom_stats, pushes_redirected);
    printf("}, \"dataset\": {\"size\": [0, %zu], ", sizeof(loom_dataset));
    first = 1;
    FIELD(loom_dataset, rows);
    FIELD(loom_dataset, nnz);
    FIELD(loom_dataset, label);
    FIELD(loom_dataset, row);
    FIELD(loom_dataset, idx);
    FIELD(loom_dataset, val);
    FIELD(loom_dataset, max_feature);
    FIELD(loom_dataset, skipped);
    FIELD(loom_dataset, first_line);
    FIELD(loom_dataset, bytes);
    printf("}, \"libsvm_opts\": {\"size\": [0, %zu], ", sizeof(loom_libsvm_opts));
    first = 1;
    FIELD(loom_libsvm_opts, ids);
    FIELD(loom_libsvm_opts, labels);
    FIELD(loom_libsvm_opts, max_features);
    FIELD(loom_libsvm_opts, skip_bad);
    printf("}, \"ratings\": {\"size\": [0, %zu], ", sizeof(loom_ratings));
    first = 1;
    FIELD(loom_ratings, n);
    FIELD(loom_ratings, user);
    FIELD(loom_ratings, item);
    FIELD(loom_ratings, rating);
    FIELD(loom_ratings, line);
    FIELD(loom_ratings, users);
    FIELD(loom_ratings, items);
    FIELD(loom_ratings, user_id);
    FIELD(loom_ratings, item_id);
    FIELD(loom_ratings, skipped);
    FIELD(loom_ratings, first_line);
    FIELD(loom_ratings, bytes);
    printf("}, \"ratings_opts\": {\"size\": [0, %zu], ", sizeof(loom_ratings_opts));
    first = 1;
    FIELD(loom_ratings_opts, separator);
    FIELD(loom_ratings_opts, skip_bad);
    printf("}, \"errors\": {\"LOOM_EINVAL\": %d, \"LOOM_ESTATE\": %d, \"count\": %d}", LOOM_EINVAL,
           LOOM_ESTATE, LOOM_ERROR_COUNT_);
    printf(
        ", \"enums\": {\"LOOM_F32\": %d, \"LOOM_F64\": %d, \"LOOM_I32\": %d, \"LOOM_I64\": %d, "
        "\"LOOM_ASP\": %d, \"LOOM_SSP\": %d, \"LOOM_BSP\": %d, \"LOOM_DENSE\": %d, "
        "\"LOOM_SPARSE\": %d, \"LOOM_INIT_ZERO\": %d, \"LOOM_INIT_UNIFORM\": %d, "
        "\"LOOM_INIT_NORMAL\": %d, \"LOOM_SCHEDULER\": %d, \"LOOM_SERVER\": %d, "
        "\"LOOM_WORKER\": %d, \"LOOM_IDS_AUTO\": %d, \"LOOM_IDS_ONE_BASED\": %d, "
        "\"LOOM_IDS_ZERO_BASED\": %d, \"LOOM_LABELS_CLASS\": %d, \"LOOM_LABELS_REAL\": %d, "
        "\"LOOM_PRIORITY_NONE\": %d, \"LOOM_PRIORITY_RANDOM\": %d, "
        "\"LOOM_PRIORITY_ROUNDROBIN\": %d, \"LOOM_PRIORITY_ABS\": %d, \"LOOM_PRIORITY_REL\": %d}",
        LOOM_F32, LOOM_F64, LOOM_I32, LOOM_I64, LOOM_ASP, LOOM_SSP, LOOM_BSP, LOOM_DENSE,
        LOOM_SPARSE, LOOM_INIT_ZERO, LOOM_INIT_UNIFORM, LOOM_INIT_NORMAL, LOOM_SCHEDULER,
        LOOM_SERVER, LOOM_WORKER, LOOM_IDS_AUTO, LOOM_IDS_ONE_BASED, LOOM_IDS_ZERO_BASED,
        LOOM_LABELS_CLASS, LOOM_LABELS_REAL, LOOM_PRIORITY_NONE, LOOM_PRIORITY_RANDOM,
        LOOM_PRIORITY_ROUNDROBIN, LOOM_PRIORITY_ABS, LOOM_PRIORITY_REL);
    loom_table_opts d = LOOM_TABLE_OPTS_DEFAULT;
    printf(", \"defaults\": {\"type\": %d, \"width\": %u, \"storage\": %d, \"key_begin\": %llu, "
           "\"key_end\": %llu, \"consistency\": %d, \"staleness\": %d, \"updater\": \"%s\", "
           "\"lr\": %.17g, \"beta\": %.17g, \"l1\": %.17g, \"l2\": %.17g, \"eps\": %.17g, "
           "\"init\": %d, \"init_a\": %.17g, \"init_b\": %.17g, \"init_seed\": %llu, "
           "\"cache\": %d, \"flush_rows\": %u, \"filter_push\": %s, \"filter_pull\": %s, "
           "\"bandwidth_mbits\": %.17g, \"priority\": %d, \"queue_rows\": %u}}\n",
           (int)d.type, d.width, (int)d.storage, (unsigned long long)d.key_begin,
           (unsigned long long)d.key_end, (int)d.consistency, d.staleness, d.updater, d.lr, d.beta,
           d.l1, d.l2, d.eps, (int)d.init, d.init_a, d.init_b, (unsigned long long)d.init_seed,
           /* the default filter specs are NULL: "?" for a spec would differ from None */
           d.cache, d.flush_rows, d.filter_push ? "\"?\"" : "null",
           d.filter_pull ? "\"?\"" : "null", d.bandwidth_mbits, (int)d.priority, d.queue_rows);
    return 0;
}
