/* A stand-in for Windows' bcryptprimitives.dll, for Wine 8 (Debian 12's), which lacks it.
 * Rust's standard library (1.78 and later) and the getrandom crate take their randomness from
 * its ProcessPrng; Wine 9 and Windows 10 have it. This one gives the same bytes source Wine's
 * own RtlGenRandom (advapi32's SystemFunction036) gives. Used only to run gimlet's Windows build
 * and tests under Wine (scripts/wine.sh); never shipped. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG chunk = length > 0x40000000 ? 0x40000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
