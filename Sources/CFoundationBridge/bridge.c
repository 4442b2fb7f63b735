/* Declarations only (include/CFoundationBridge.h); SwiftPM wants a source file in a C target. */
#include "CFoundationBridge.h"
