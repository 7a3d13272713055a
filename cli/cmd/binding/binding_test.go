package binding

import "testing"

func TestEnvName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"uri": "URI", "jdbcUrl": "JDBCURL", "db-host": "DB_HOST", "a.b": "A_B", "1st": "_1ST", "": "_", "ünï": "_N_",
	} {
		if got := EnvName(in); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", in, got, want)
		}
	}
}
