// Package service wires `ragwatch run` and `ragwatch worker` from one ordered list of
// components (parts, in app.go): it builds each command's entries from the config back to
// front (exporters first, receivers last), starts them in that order so nothing flows into a
// stage that is not running, and shuts them down in reverse: receivers stop accepting, the
// assembler drains what it holds, then exporters flush and NATS closes.
package service
