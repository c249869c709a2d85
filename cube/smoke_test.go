package cube_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/cube/cubetest"
)

func TestSmoke(t *testing.T) {
	srv := cubetest.New(t, cubetest.Options{})
	c, err := cube.New(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "hello.txt"), []byte("hi from host\n"), 0o644)
	ctx := context.Background()
	sb, err := c.Create(ctx, cube.CreateRequest{TemplateID: "base", HostMounts: []cube.HostMount{{HostPath: src, MountPath: "/mnt/strata/src", ReadOnly: true}, {HostPath: src, MountPath: src}}})
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	res, err := c.Exec(ctx, sb, cube.ExecRequest{Cmd: "/bin/sh", Args: []string{"-c", "cat /mnt/strata/src/hello.txt; ls " + src + "; echo oops >&2; touch /mnt/strata/src/x; echo $? ; echo tmp > /tmp/t; ls /tmp; exit 3"}}, &out, &errb)
	t.Logf("res=%+v err=%v\nstdout=%s\nstderr=%s", res, err, out.String(), errb.String())
	if _, err := os.Stat("/mnt/strata"); err == nil {
		t.Fatal("host /mnt/strata created")
	}
}
