# Writes OUTPUT, a C++ file defining `extern const char SYMBOL[]` with the bytes of INPUT (a text file).
file(READ ${INPUT} content HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${content}")
file(WRITE ${OUTPUT} "namespace rlgemm {\nextern const char ${SYMBOL}[];\nconst char ${SYMBOL}[] = {${bytes} 0x00};\n}\n")
