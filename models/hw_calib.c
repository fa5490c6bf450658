/*
 * Hardware descriptions with their calibration applied: hw_load().
 *
 * After the INI (models/hw.c, hw_load_ini_path()), hw_load() looks for a calibration CSV next to
 * it, <dir of the INI>/../calib/<stem>.csv (so models/calib/h200.csv for
 * "h200", under the same data root the INI came from).  When that file
 * exists, every row of a modelled op is fitted (models/fit.c) starting from
 * the INI's values, the fitted gemm_eff, gemm_half_flops, gemm_lat_s,
 * launch_s, mem_eff and attn_eff replace the INI's, and `calibration` names
 * the CSV, its row counts, device and file date; a bad CSV or a failed fit
 * is an error (the INI's values are never silently kept).  Nothing is cached
 * on disk: the fit takes milliseconds.  TAILSIM_NO_CALIB=1 (any value but
 * "" and "0") skips the step, as does hw_load_ini().
 *
 * This file sits above the cost model and the fit (models/calib.c,
 * models/fit.c, models/cost.c), which themselves only need the INI loader,
 * so that the loader depends on nothing of the model.
 */
#include "models/hw_calib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "models/calib.h"
#include "models/fit.h"

int hw_calib_path(const char *ini_path, char *buf, size_t n)
{
    char st[64];
    hw_path_stem(ini_path, st, sizeof st);
    /* <dir>/../calib, written as <parent of dir>/calib when dir has a plain
     * last component ("models/hw/h200.ini" -> "models/calib/h200.csv") */
    const char *slash = strrchr(ini_path, '/');
    int dl = slash ? (int)(slash - ini_path) : 0;
    const char *last = ini_path;
    for (int i = 0; i < dl; i++)
        if (ini_path[i] == '/')
            last = ini_path + i + 1;
    int ll = (int)(ini_path + dl - last);
    int plain = dl > 0 && ll > 0 && strncmp(last, ".", (size_t)ll) && strncmp(last, "..", (size_t)ll);
    if (!slash)
        snprintf(buf, n, "../calib/%s.csv", st);
    else if (plain && last > ini_path)
        snprintf(buf, n, "%.*scalib/%s.csv", (int)(last - ini_path), ini_path, st);
    else if (plain)
        snprintf(buf, n, "calib/%s.csv", st);
    else
        snprintf(buf, n, "%.*s/../calib/%s.csv", dl, ini_path, st);
    const char *off = getenv("TAILSIM_NO_CALIB");
    if (off && *off && strcmp(off, "0"))
        return 0;
    struct stat sb;
    return stat(buf, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Fits d's parameters to every row of the calibration CSV at csv and says
 * so in d->calibration. */
static int apply_calib(hw_desc *d, const char *ini, const char *csv, ts_err *e)
{
    calib_row *rows = NULL;
    size_t n = 0;
    fit_result fr;
    if (calib_csv_load(csv, &rows, &n, e) || fit_hw(d, rows, n, NULL, &fr, e)) {
        free(rows);
        return ts_err_prefix(e, "calibration of %s: ", ini);
    }
    /* name the CSV as the data tree does when the INI sits in models/hw */
    char shown[80], st[64];
    const char *slash = strrchr(ini, '/');
    size_t dl = slash ? (size_t)(slash - ini) : 0, cl = strlen(csv);
    hw_path_stem(ini, st, sizeof st);
    if (dl >= 9 && !strncmp(ini + dl - 9, "models/hw", 9))
        snprintf(shown, sizeof shown, "models/calib/%.50s.csv", st);
    else if (cl < sizeof shown)
        memcpy(shown, csv, cl + 1);
    else /* keep the end of a long path */
        snprintf(shown, sizeof shown, "...%s", csv + cl - (sizeof shown - 4));
    char date[32] = "undated";
    struct stat sb;
    struct tm tm;
    if (stat(csv, &sb) == 0 && gmtime_r(&sb.st_mtime, &tm))
        strftime(date, sizeof date, "%Y-%m-%d", &tm);
    *d = fr.hw;
    calib_host_bw(rows, n, &d->pcie_bw); /* measured pinned copies, when there are */
    char text[512]; /* formatted in full, then cut to the field's size */
    snprintf(text, sizeof text, "%s (%zu/%zu rows fitted at load, %.40s, file of %s)", shown,
             fr.rows, n, rows[0].device, date);
    snprintf(d->calibration, sizeof d->calibration, "%.*s", (int)sizeof d->calibration - 1, text);
    free(rows);
    return 0;
}

int hw_load(const char *name, hw_desc *hw, ts_err *e)
{
    hw_desc d;
    char ini[HW_PATH_SZ], csv[HW_PATH_SZ + 64];
    if (hw_load_ini_path(name, &d, ini, sizeof ini, e))
        return -1;
    if (hw_calib_path(ini, csv, sizeof csv) && apply_calib(&d, ini, csv, e))
        return -1;
    *hw = d;
    return 0;
}
