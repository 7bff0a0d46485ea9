# bash completion for cardbaton(1), sshgpu and the cardbaton-* tools.
#
# Installed as .../bash-completion/completions/cardbaton (and a symlink
# sshgpu); bash-completion loads it on the first <TAB> after one of those
# names.  The cardbaton-* commands are registered here too, so they complete
# once this file has been loaded (or when it is sourced from ~/.bashrc).
#
# --node completes the node names of the configuration in use and JOB_ID
# operands complete the job IDs found in the spool's file names.

_cardbaton_subcommands="run submit status logs promote pause resume cancel hold release wait drain undrain gpus bootstrap top metrics report mcp users"

# _cardbaton_flags SUBCOMMAND: its flags, as in its man page's SYNOPSIS.
_cardbaton_flags() {
	case $1 in
	run|spoold) echo "--config --once --public-key --help" ;;
	submit) echo "--config --job --node --gpus --gpu-count --gpu-memory --share --priority --timeout --cwd --name --resume-command --env --hold --begin --after --after-any --array --param --max-running --help" ;;
	status) echo "--config --json --all --state --node --name --since --user --mine --help" ;;
	logs) echo "--config --attempt -f --help" ;;
	promote) echo "--config --priority --help" ;;
	pause|resume|cancel|hold|release) echo "--config --help" ;;
	wait) echo "--config --timeout --help" ;;
	drain) echo "--config --checkpoint --help" ;;
	undrain) echo "--config --help" ;;
	gpus) echo "--config --node --json --help" ;;
	bootstrap) echo "--config --node --public-key --lab --remove --help" ;;
	top) echo "--config --once --help" ;;
	metrics|mcp) echo "--config --help" ;;
	report) echo "--config --since --html --json --help" ;;
	users) echo "--config --json --help" ;;
	*) echo "--config --help --version" ;;
	esac
}

# _cardbaton_config WORD...: the config file in use for this command line:
# --config PATH (or --config=PATH), else ./config.yaml, else
# $XDG_CONFIG_HOME/cardbaton/config.yaml; nothing for the embedded default.
_cardbaton_config() {
	local w next=
	for w in "$@"; do
		if [ -n "$next" ]; then
			case $w in
			"~/"*) printf '%s\n' "$HOME/${w#"~/"}" ;;
			*) printf '%s\n' "$w" ;;
			esac
			return
		fi
		case $w in
		--config) next=1 ;;
		--config=*) printf '%s\n' "${w#--config=}"; return ;;
		esac
	done
	if [ -f ./config.yaml ]; then
		echo ./config.yaml
	elif [ -f "${XDG_CONFIG_HOME:-$HOME/.config}/cardbaton/config.yaml" ]; then
		echo "${XDG_CONFIG_HOME:-$HOME/.config}/cardbaton/config.yaml"
	fi
}

# _cardbaton_nodes CONFIG: the keys of its top-level nodes: mapping.
_cardbaton_nodes() {
	if [ -z "$1" ]; then
		echo local
		return
	fi
	[ -r "$1" ] || return
	awk '
		/^[^ \t#]/ { innodes = ($0 ~ /^nodes:[ \t]*(#.*)?$/); next }
		innodes && /^  [^ \t#-][^:]*:/ {
			k = $0; sub(/^  /, "", k); sub(/:.*/, "", k)
			gsub(/^["\047]|["\047]$/, "", k)
			print k
		}' "$1"
}

# _cardbaton_spool CONFIG: the spool directory it names.
_cardbaton_spool() {
	local s dir
	if [ -n "$1" ] && [ -r "$1" ]; then
		s=$(sed -n 's/^spool:[ \t]*//p' "$1" | sed 's/[ \t]#.*$//; s/[ \t]*$//' |
			sed "s/^[\"']//; s/[\"']\$//" | head -n 1)
	fi
	if [ -z "$s" ]; then
		if [ -n "$1" ]; then
			s=./spool
		else
			echo "${XDG_STATE_HOME:-$HOME/.local/state}/cardbaton/spool"
			return
		fi
	fi
	case $s in
	"~") s=$HOME ;;
	"~/"*) s=$HOME/${s#"~/"} ;;
	/*) ;;
	*) dir=$(dirname -- "$1"); s=$dir/$s ;;
	esac
	printf '%s\n' "$s"
}

# _cardbaton_ids CONFIG DIR...: job IDs from the names in SPOOL/DIR/.
_cardbaton_ids() {
	local spool f n d
	spool=$(_cardbaton_spool "$1")
	shift
	[ -d "$spool" ] || return
	for d in "$@"; do
		for f in "$spool/$d"/*.job; do
			[ -e "$f" ] || continue
			n=${f##*/}
			n=${n%.job}
			case $n in
			[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]-[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9])
				n=${n#*-} ;;
			[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]) ;;
			*) continue ;;
			esac
			while [ "${n#0}" != "$n" ]; do n=${n#0}; done
			[ -n "$n" ] && echo "$n"
		done
	done | sort -un
}

# The completion function for cardbaton and sshgpu.
_cardbaton() {
	local cur prev sub i w config words
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=
	[ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD-1]}
	COMPREPLY=()

	# The subcommand: the first word after the command that is not an
	# option (or the argument of --config).
	sub=
	case ${COMP_WORDS[0]##*/} in
	cardbaton-spoold|cardbaton-run) sub=run ;;
	cardbaton-*) sub=${COMP_WORDS[0]##*/cardbaton-}; sub=${sub#cardbaton-} ;;
	esac
	if [ -z "$sub" ]; then
		i=1
		while [ "$i" -lt "$COMP_CWORD" ]; do
			w=${COMP_WORDS[i]}
			case $w in
			--config) i=$((i + 1)) ;;
			-*) ;;
			*) sub=$w; break ;;
			esac
			i=$((i + 1))
		done
	fi
	config=$(_cardbaton_config "${COMP_WORDS[@]:0:COMP_CWORD}")

	# The argument of a flag.
	case $prev in
	--config|--job|--public-key|--html)
		COMPREPLY=($(compgen -f -- "$cur"))
		return ;;
	--state)
		COMPREPLY=($(compgen -W "queued running pausing paused succeeded failed cancelled lost" -- "$cur"))
		return ;;
	--cwd)
		COMPREPLY=($(compgen -d -- "$cur"))
		return ;;
	--node)
		COMPREPLY=($(compgen -W "$(_cardbaton_nodes "$config")" -- "$cur"))
		return ;;
	--user)
		COMPREPLY=($(compgen -u -- "$cur"))
		return ;;
	--gpus|--gpu-count|--priority|--timeout|--name|--resume-command|--env|--attempt|--since)
		return ;;
	esac

	if [ -z "$sub" ]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "$(_cardbaton_flags)" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$_cardbaton_subcommands" -- "$cur"))
		fi
		return
	fi

	# submit: after "--" everything is the job's command.
	if [ "$sub" = submit ]; then
		for w in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
			if [ "$w" = -- ]; then
				COMPREPLY=($(compgen -c -- "$cur"))
				return
			fi
		done
	fi

	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$(_cardbaton_flags "$sub")" -- "$cur"))
		return
	fi

	case $sub in
	promote|pause|resume|cancel|wait)
		COMPREPLY=($(compgen -W "$(_cardbaton_ids "$config" new queued running paused)" -- "$cur")) ;;
	hold|release)
		COMPREPLY=($(compgen -W "$(_cardbaton_ids "$config" new queued)" -- "$cur")) ;;
	drain|undrain)
		COMPREPLY=($(compgen -W "$(_cardbaton_nodes "$config")" -- "$cur")) ;;
	status|logs)
		COMPREPLY=($(compgen -W "$(_cardbaton_ids "$config" new queued running paused done)" -- "$cur")) ;;
	esac
}

complete -F _cardbaton cardbaton sshgpu cardbaton-submit cardbaton-status \
	cardbaton-logs cardbaton-promote cardbaton-pause cardbaton-resume \
	cardbaton-cancel cardbaton-hold cardbaton-release cardbaton-wait cardbaton-drain cardbaton-undrain cardbaton-gpus cardbaton-bootstrap cardbaton-spoold \
	cardbaton-top cardbaton-metrics cardbaton-report cardbaton-mcp cardbaton-users \
	cardbaton-run
