/*
 * Fuzz regressions: replays every file of tests/fuzz/corpus/<target>/ (the
 * seed corpus and every crash `make fuzz` ever found) through its target.
 * A target aborts on a broken contract, so a failing input crashes its test.
 */
#include <criterion/criterion.h>
#include <dirent.h>

#include "tests/fuzz/targets.h"

static int replay_dir(const char *target, int (*fn)(const uint8_t *, size_t))
{
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", target);
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "no corpus directory %s", dir);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        FILE *f = fopen(path, "rb");
        cr_assert_not_null(f, "%s", path);
        uint8_t *buf = malloc(1 << 20);
        size_t len = fread(buf, 1, 1 << 20, f);
        fclose(f);
        fn(buf, len);
        free(buf);
        n++;
    }
    closedir(d);
    return n;
}

Test(fuzz, trace_corpus) { cr_assert_gt(replay_dir("trace", fuzz_trace), 5); }
Test(fuzz, scenario_corpus) { cr_assert_gt(replay_dir("scenario", fuzz_scenario), 3); }
Test(fuzz, vidur_corpus) { cr_assert_gt(replay_dir("vidur", fuzz_vidur), 2); }
Test(fuzz, batch_corpus) { cr_assert_gt(replay_dir("batch", fuzz_batch), 2); }
Test(fuzz, dcpplan_corpus, .timeout = 120) { cr_assert_gt(replay_dir("dcpplan", fuzz_dcpplan), 2); }
Test(fuzz, calib_corpus) { cr_assert_gt(replay_dir("calib", fuzz_calib), 2); }
Test(fuzz, grid_corpus) { cr_assert_gt(replay_dir("grid", fuzz_grid), 5); }
