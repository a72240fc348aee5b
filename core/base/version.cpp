// libdwell's version string, for `dwell --version` and plugin diagnostics.
namespace dwell {
const char* version() {
    return DWELL_VERSION;
}
}  // namespace dwell
