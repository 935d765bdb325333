// header_check.cpp - the checks of header_check.c, compiled as C++ (the header's
// extern "C" block, C++-compatible declarations, -pedantic under C++11 and C++17).
#include "header_check.c"
