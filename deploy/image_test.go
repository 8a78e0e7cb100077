package deploy

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// Every image the project builds starts from nothing or from bytes pinned by digest: a base
// image named by a tag can change under the same name. ragwatch's own is FROM scratch (the
// binary carries its CA roots and time zones; cmd/ragwatch's TestReleaseBuildCarriesRootsAndZones).
func TestDockerfileBaseImagesArePinned(t *testing.T) {
	b, err := os.ReadFile("docker/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	pinned := regexp.MustCompile(`@sha256:[0-9a-f]{64}(\s|$)`)
	var froms int
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.EqualFold(f[0], "FROM") {
			continue
		}
		froms++
		if img := f[1]; img != "scratch" && !pinned.MatchString(img) {
			t.Errorf("docker/Dockerfile: FROM %s is neither scratch nor pinned by digest (image@sha256:…)", img)
		}
	}
	if froms == 0 {
		t.Fatal("docker/Dockerfile has no FROM line")
	}
	if !strings.Contains(string(b), "COPY bin/ragwatch /ragwatch") {
		t.Error("docker/Dockerfile does not copy bin/ragwatch, the binary `make build` writes")
	}
	if _, err := os.Stat("docker/rootfs/var/lib/ragwatch"); err != nil {
		t.Errorf("the image's data directory: %v", err)
	}
}
