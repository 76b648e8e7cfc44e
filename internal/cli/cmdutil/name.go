package cmdutil

// OneName is the name a command takes either as its argument or as --name (cotal stop
// coder, cotal stop --name coder): the argument, else the flag. Given both, they must
// agree; two different names are a usage error. args holds at most one argument (the
// command's Args is cobra.MaximumNArgs(1)); "" means neither was given.
func OneName(args []string, flag string) (string, error) {
	switch {
	case len(args) == 0:
		return flag, nil
	case flag == "" || flag == args[0]:
		return args[0], nil
	}
	return "", FlagErrorf("the name is given twice, as the argument %q and as --name %q: give it once", args[0], flag)
}
