"""Table and column names the store refuses (a 400 naming them) or accepts and handles as data
(``tiering.kvstore.names``): the store's tests check both, the pipeline's tier every accepted one."""

REFUSED_TABLE_NAMES = [
    "", ".", "..", "../escape", "../../etc/passwd", "a/b", "/abs", "a\\b", "..\\x", "nul\x00byte", "tab\tname",
    "new\nline", "del\x7f", " leading", "trailing ", "a" * 256, "é" * 128,
]
ACCEPTED_TABLE_NAMES = [
    "it's", '"quoted"', "back`tick", "with space", "dots.in.name", "a..b", "...", ".hidden", "trailing.", "-dash",
    "__system_like", "ünïcödé", "表格", "🚀rocket", "select", "DROP TABLE orders; --", "Robert'); DROP TABLE tables;--",
    "%2e%2e", "50%", "?query#frag", "*", "[glob]?", "{a,b}", "a:b", "~user", "$HOME", "a" * 255, "é" * 127,
]
REFUSED_COLUMN_NAMES = ["__bucket", "__offset", "__timestamp", "__op", "__anything", "", "nul\x00", "a" * 256]
ACCEPTED_COLUMN_NAMES = ["select", "order", '"q"', "`b`", "with space", "a.b", "ü", "_single", "Payload Text", "c" * 255]
