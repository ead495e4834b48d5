/* What libfastattn.so exports: the public API (this folder's headers) and nothing else. The
 * library is compiled with hidden visibility: an internal symbol exported by default would be
 * shared with any other copy of fastattn in the process (GNU_UNIQUE statics, interposed inline
 * functions), e.g. a kernel's "shared-memory attribute set" flag read from the wrong library. */
#ifndef FASTATTN_EXPORT_H
#define FASTATTN_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define FASTATTN_API __attribute__((visibility("default")))
#else
#define FASTATTN_API
#endif

#endif
