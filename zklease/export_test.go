// Internal names the black-box tests use.

package zklease

// RedactPath exposes redactPath to the tests.
var RedactPath = redactPath
