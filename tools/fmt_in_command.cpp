// The few fmt functions the command's objects call out of line (vformat, the format-string
// error, the printable check, the thousands separator), compiled into the command from fmt's
// own definitions header, which fmt ships for building it into a program (format-inl.h; the
// same headers the objects were compiled with), so that the command does not load libfmt.so.
// With libstdc++ linked statically too (CMakeLists.txt), the command loads only libc and libm
// (its own math calls). In an empty program, loading libfmt, libstdc++, libgcc_s and libm took
// about 0.45 ms before main (docs/launching.md, "Joining").
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {
template auto thousands_sep_impl<char>(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl<char>(locale_ref) -> char;
}  // namespace detail
FMT_END_NAMESPACE
