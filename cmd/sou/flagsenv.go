package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// applyEnvAndConfig fills every flag the user did not set on the command
// line, first from SOU_<FLAG> environment variables (dashes become
// underscores), then from the config file (lines of `flag = value`, # for
// comments; repeated lines for list flags). Command-line flags win.
func applyEnvAndConfig(fs *pflag.FlagSet, configPath string) error {
	fromFile := map[string][]string{}
	if configPath != "" {
		f, err := os.Open(configPath)
		if err != nil {
			return fmt.Errorf("--config: %w", err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		line := 0
		for sc.Scan() {
			line++
			s := strings.TrimSpace(sc.Text())
			if s == "" || strings.HasPrefix(s, "#") {
				continue
			}
			k, v, ok := strings.Cut(s, "=")
			k, v = strings.TrimSpace(k), strings.Trim(strings.TrimSpace(v), `"`)
			if !ok || k == "" {
				return fmt.Errorf("%s:%d: want `flag = value`", configPath, line)
			}
			if fs.Lookup(k) == nil {
				return fmt.Errorf("%s:%d: unknown setting %q", configPath, line, k)
			}
			fromFile[k] = append(fromFile[k], v)
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("read %s: %w", configPath, err)
		}
	}
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "config" {
			return
		}
		env := "SOU_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s=%q: %w", env, v, e)
			}
			return
		}
		for _, v := range fromFile[f.Name] {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s: %s = %q: %w", configPath, f.Name, v, e)
				return
			}
		}
	})
	return err
}
