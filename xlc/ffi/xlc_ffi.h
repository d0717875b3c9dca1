/* xlc_ffi.h: the calling convention of xlc custom-call targets (xlc.ffi.register).
 *
 * A target is a C function
 *
 *     int32_t my_target(const xlc_buffer *args, int64_t nargs,
 *                       xlc_buffer *results, int64_t nresults,
 *                       const char *attrs, char *error);
 *
 * called once per execution of the custom-call with its operands (`args`, in order) and its
 * results (`results`: one per array of the result, a tuple's elements in order). Every buffer
 * is a dense row-major array; `dims` has `rank` entries. Results are written in place: their
 * memory is the compiled program's (do not keep the pointers). `attrs` is the custom-call's
 * backend_config text ("" when it has none), for example "{scale = 2.5 : f32}".
 *
 * Return 0 on success. Any other value is an error: write a message (at most
 * XLC_FFI_ERROR_SIZE - 1 bytes, NUL-terminated) into `error`; the call that ran the program
 * raises xlc.errors.CustomCallError naming the target, the code and the message. The function
 * may be called from any thread, but never concurrently for one execution.
 */
#ifndef XLC_FFI_H
#define XLC_FFI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XLC_FFI_ERROR_SIZE 256

/* Element types: XLA's PrimitiveType numbers. */
enum xlc_dtype {
  XLC_PRED = 1,
  XLC_S8 = 2, XLC_S16 = 3, XLC_S32 = 4, XLC_S64 = 5,
  XLC_U8 = 6, XLC_U16 = 7, XLC_U32 = 8, XLC_U64 = 9,
  XLC_F16 = 10, XLC_F32 = 11, XLC_F64 = 12, XLC_C64 = 15, XLC_BF16 = 16, XLC_C128 = 18,
};

typedef struct xlc_buffer {
  int32_t dtype;        /* enum xlc_dtype */
  int32_t rank;
  const int64_t *dims;  /* rank sizes, major to minor */
  void *data;           /* dims[0] * ... * dims[rank-1] elements, row-major */
} xlc_buffer;

typedef int32_t (*xlc_ffi_fn)(const xlc_buffer *args, int64_t nargs, xlc_buffer *results,
                              int64_t nresults, const char *attrs, char *error);

#ifdef __cplusplus
}
#endif
#endif /* XLC_FFI_H */
