/**
 * `response_format: json_object` without a schema: any flat JSON object of at most 8 properties, keys of up to 32
 * letters, digits and underscores, values strings of up to 64 characters, whole numbers, booleans or null. A model
 * that fills a free string forever (the random demo model) still closes the object within a few hundred tokens.
 */
export const BOUNDED_JSON_OBJECT_GBNF = String.raw`root ::= "{" ws ( pair ( "," ws pair ){0,7} )? ws "}"
pair ::= key ws ":" ws value
key ::= "\"" [a-zA-Z_] [a-zA-Z0-9_]{0,31} "\""
value ::= string | number | "true" | "false" | "null"
string ::= "\"" char{0,64} "\""
char ::= [^"\\\x00-\x1f] | "\\" ["\\/bfnrt]
number ::= "-"? [0-9]{1,15}
ws ::= " "?
`;
